// Package argocd carries the Argo CD health check for RedisCluster: the Lua
// script health.lua (embedded here), its fixtures in Argo CD's own layout
// (health_test.yaml and testdata/), and the argocd-cm patch that installs it,
// generated into kustomize/components/argocd so that health.lua stays the
// only source of the script.
//
// Regenerate the patch after editing health.lua:
//
//	go generate ./health/argocd
//
// (a test fails while the committed patch differs from ConfigMapPatch).
package argocd

//go:generate go run ./internal/genpatch ../../kustomize/components/argocd/argocd-cm-health.yaml

import (
	_ "embed"
	"fmt"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// HealthLua is the Lua health check, the content of health.lua.
//
//go:embed health.lua
var HealthLua string

// ConfigMapName is the name of Argo CD's main ConfigMap, where resource
// customizations live (Argo CD operator manual, "Resource Health").
const ConfigMapName = "argocd-cm"

// ConfigMapKey is the argocd-cm key of a custom health check for group
// cache.redis.io, kind RedisCluster: resource.customizations.health.<group>_<kind>.
const ConfigMapKey = "resource.customizations.health.cache.redis.io_RedisCluster"

// ConfigMapPatch returns a strategic-merge patch of argocd-cm that adds
// HealthLua under ConfigMapKey as a YAML literal block, so the script reads
// in the patch as it does in health.lua. It fails only if the YAML encoder
// does.
func ConfigMapPatch() ([]byte, error) {
	scalar := func(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: v} }
	mapping := func(kv ...*yaml.Node) *yaml.Node { return &yaml.Node{Kind: yaml.MappingNode, Content: kv} }
	lua := scalar(HealthLua)
	lua.Style = yaml.LiteralStyle
	doc := &yaml.Node{
		Kind:        yaml.DocumentNode,
		HeadComment: "Generated from health/argocd/health.lua by `go generate ./health/argocd`; do not edit.",
		Content: []*yaml.Node{mapping(
			scalar("apiVersion"), scalar("v1"),
			scalar("kind"), scalar("ConfigMap"),
			scalar("metadata"), mapping(scalar("name"), scalar(ConfigMapName)),
			scalar("data"), mapping(scalar(ConfigMapKey), lua),
		)},
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encoding the %s patch: %w", ConfigMapName, err)
	}
	return out, nil
}
