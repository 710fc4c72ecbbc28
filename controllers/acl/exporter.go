package acl

// ExporterUser is the ACL user the redis_exporter sidecar (spec.exporter) logs in as, named
// after the operator so that no application user is likely to have the name. Its password is
// the operator's own (generated once per cluster, in the Secret
// <cluster>-exporter), so rotating spec.auth or a spec.users password never reaches the
// exporter, which reads its password once, when its container starts.
const ExporterUser = "redis-operator-exporter"

// ExporterRules are ExporterUser's rules after User.Args's "reset resetchannels on": what redis_exporter
// sends on each scrape with the sidecar's settings and nothing else, so the user reads no key,
// no channel and no configuration, except that SLOWLOG GET shows the arguments of the
// slowest recent command, which can hold key names and values. The commands are those of redis_exporter's scrape
// (exporter/exporter.go, latency.go and slowlog.go of oliver006/redis_exporter v1.67.0, the
// sidecar's default image): CLIENT SETNAME, INFO ALL, CLUSTER INFO, LATENCY LATEST, LATENCY
// HISTOGRAM, SLOWLOG LEN, SLOWLOG GET; PING for its -ping-on-connect. CONFIG GET is left
// out: it would hand the exporter requirepass and masterauth, so the sidecar runs with
// REDIS_EXPORTER_CONFIG_COMMAND=- (no redis_config_* series). TestExporterMetricsList in
// kustomize scrapes a real node with these rules and finds no command refused (ACL LOG).
var ExporterRules = []string{
	"+client|setname", "+info", "+ping", "+cluster|info",
	"+latency|latest", "+latency|histogram", "+slowlog|len", "+slowlog|get",
}
