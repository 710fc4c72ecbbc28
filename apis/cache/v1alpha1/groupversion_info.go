// Package v1alpha1 contains the v1alpha1 API of the cache.redis.io group: the
// RedisCluster kind in its original, small form. It is a spoke: it converts
// to and from the v1beta1 hub, losing nothing (see conversion.go).
//
// +kubebuilder:object:generate=true
// +groupName=cache.redis.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: "cache.redis.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this group-version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
