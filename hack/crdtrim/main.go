// Command crdtrim removes the descriptions that controller-gen copies from
// Kubernetes' own types into the RedisCluster CRD under the pod extras
// (spec.pod.sidecars, initContainers, volumes and volumeMounts;
// apis/cache/v1beta1/podknobs_types.go). Their schemas
// stay whole, so the API server still validates every field; only the text
// goes, which `kubectl explain pod.spec.containers` and the Kubernetes API
// reference carry. Without it the CRD is about 300 KB of JSON, more than the
// 256 KB (262144 bytes) that `kubectl apply` without --server-side, and Argo
// CD's default sync, store in the last-applied-configuration annotation.
//
// Usage: crdtrim FILE — rewrites FILE in place (`make manifests` runs it).
package main

import (
	"fmt"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// podExtras are the fields of spec.pod whose schemas are Kubernetes' own types.
var podExtras = []string{"sidecars", "initContainers", "volumes", "volumeMounts"}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdtrim FILE")
		os.Exit(2)
	}
	if err := trimFile(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "crdtrim:", err)
		os.Exit(1)
	}
}

func trimFile(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		pod, ok := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["pod"]
		if !ok {
			continue
		}
		for _, name := range podExtras {
			field, ok := pod.Properties[name]
			if !ok {
				continue
			}
			keep := field.Description
			stripDescriptions(&field)
			field.Description = keep
			pod.Properties[name] = field
		}
		v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["pod"] = pod
	}
	// As controller-gen writes it: without the status that the type adds.
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&crd)
	if err != nil {
		return err
	}
	delete(obj, "status")
	out, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte("---\n"), out...), 0o644)
}

// stripDescriptions clears the description of s and of every schema below it.
func stripDescriptions(s *apiextensionsv1.JSONSchemaProps) {
	s.Description = ""
	for k, p := range s.Properties {
		stripDescriptions(&p)
		s.Properties[k] = p
	}
	if s.Items != nil && s.Items.Schema != nil {
		stripDescriptions(s.Items.Schema)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		stripDescriptions(s.AdditionalProperties.Schema)
	}
}
