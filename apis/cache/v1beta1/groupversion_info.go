// Package v1beta1 contains the v1beta1 API of the cache.redis.io group: the
// RedisCluster kind in its full form. v1beta1 is the storage version and the
// conversion hub; every other version converts to and from it.
//
// +kubebuilder:object:generate=true
// +groupName=cache.redis.io
package v1beta1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: "cache.redis.io", Version: "v1beta1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this group-version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
