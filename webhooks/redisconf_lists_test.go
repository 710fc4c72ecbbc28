package webhooks

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/redis-operator/redis-operator/controllers/resources"
)

// TestControllerRefusesWhatTheWebhookRefuses: the parameters the grammar
// refuses or locks off are exactly resources.RefusedConfigKeys and
// LockedOffConfigKeys, which the controller refuses too when a spec
// reached it without the webhook.
func TestControllerRefusesWhatTheWebhookRefuses(t *testing.T) {
	for name, prm := range redisParams {
		switch {
		case prm.kind == kindRefused && !slices.Contains(resources.RefusedConfigKeys, name):
			t.Errorf("%s is refused by the webhook but not in resources.RefusedConfigKeys", name)
		case prm.kind == kindLockedOff && !slices.Contains(resources.LockedOffConfigKeys, name):
			t.Errorf("%s is locked off by the webhook but not in resources.LockedOffConfigKeys", name)
		}
	}
	for _, name := range resources.RefusedConfigKeys {
		if redisParams[name].kind != kindRefused {
			t.Errorf("resources.RefusedConfigKeys has %s, which the webhook does not refuse", name)
		}
	}
	for _, name := range resources.LockedOffConfigKeys {
		if redisParams[name].kind != kindLockedOff {
			t.Errorf("resources.LockedOffConfigKeys has %s, which the webhook does not lock off", name)
		}
	}
}

// TestShippedExporterImageIsTheDefault: the exporter image enabling needs
// no access check for is the one the CRD defaults spec.exporter.image to.
func TestShippedExporterImageIsTheDefault(t *testing.T) {
	crd, err := os.ReadFile(filepath.Join("..", "kustomize", "base", "crd", "bases", "cache.redis.io_redisclusters.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(crd), "default: "+shippedExporterImage+"\n") {
		t.Errorf("the RedisCluster CRD does not default an image to %s: update shippedExporterImage with ExporterSpec.Image's default", shippedExporterImage)
	}
}
