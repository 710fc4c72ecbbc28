package backup

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

func TestEndpointPolicyCheck(t *testing.T) {
	p := EndpointPolicy{Allowlist: []string{"https://s3.eu-west-1.amazonaws.com", "http://minio.storage.svc:9000/", "https://store.example.com/tenant-a"}}
	for _, c := range []struct {
		endpoint string
		ok       bool
	}{
		{"https://s3.eu-west-1.amazonaws.com", true},
		{"https://s3.eu-west-1.amazonaws.com/", true},
		{"https://S3.EU-West-1.amazonaws.com:443", true},
		{"https://s3.eu-west-1.amazonaws.com:8443", false},
		{"http://s3.eu-west-1.amazonaws.com", false}, // another scheme
		{"https://s3.eu-west-1.amazonaws.com.evil.io", false},
		{"https://evil.io/s3.eu-west-1.amazonaws.com", false},
		{"http://minio.storage.svc:9000", true},
		{"http://minio.storage.svc", false},  // port 80
		{"https://store.example.com", false}, // the entry's path is not below /
		{"https://169.254.169.254", false},
		{"https://user:pw@s3.eu-west-1.amazonaws.com", false},
		{"https://s3.eu-west-1.amazonaws.com?x=1", false},
		{"s3.eu-west-1.amazonaws.com", false},
		{"ftp://s3.eu-west-1.amazonaws.com", false},
	} {
		err := p.Check(c.endpoint)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrEndpointNotAllowed)) {
			t.Errorf("Check(%q) = %v, want ok %v", c.endpoint, err, c.ok)
		}
	}
	if err := p.Check("https://169.254.169.254"); err == nil || !strings.Contains(err.Error(), "--"+EndpointAllowlistFlag) {
		t.Fatalf("the refusal does not name the flag: %v", err)
	}

	// The zero value: every endpoint, http too (the operator's behaviour
	// before the policy).
	for _, e := range []string{"http://10.0.0.1:9000", "https://anything.example"} {
		if err := (EndpointPolicy{}).Check(e); err != nil {
			t.Errorf("zero policy, %s: %v", e, err)
		}
	}
	deny := EndpointPolicy{DenyInsecureHTTP: true}
	if err := deny.Check("http://minio:9000"); !errors.Is(err, ErrEndpointNotAllowed) || !strings.Contains(err.Error(), "--"+EndpointInsecureHTTPFlag+"=false") {
		t.Fatalf("http refused: %v", err)
	}
	if err := deny.Check("https://minio:9000"); err != nil {
		t.Fatal(err)
	}
}

func TestEndpointPolicyFlags(t *testing.T) {
	parse := func(args ...string) (EndpointPolicy, error) {
		var p EndpointPolicy
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(&bytes.Buffer{})
		p.BindFlags(fs)
		err := fs.Parse(args)
		return p, err
	}
	p, err := parse()
	if err != nil || len(p.Allowlist) != 0 || p.DenyInsecureHTTP {
		t.Fatalf("defaults: %+v, %v", p, err)
	}
	p, err = parse("--"+EndpointAllowlistFlag+"=https://a.example, https://b.example:9000", "--"+EndpointAllowlistFlag+"=http://c.example",
		"--"+EndpointInsecureHTTPFlag+"=false")
	if err != nil || strings.Join(p.Allowlist, " ") != "https://a.example https://b.example:9000 http://c.example" || !p.DenyInsecureHTTP {
		t.Fatalf("%+v, %v", p, err)
	}
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "http://c.example") {
		t.Fatalf("an http entry with http refused: %v", err)
	}
	if p, err = parse("--" + EndpointInsecureHTTPFlag); err != nil || p.DenyInsecureHTTP {
		t.Fatalf("the bare boolean flag: %+v, %v", p, err)
	}
	if _, err := parse("--" + EndpointAllowlistFlag + "=s3.example.com"); err == nil {
		t.Fatal("an entry without a scheme parsed")
	}
	if _, err := parse("--" + EndpointAllowlistFlag + "=https://u:p@s3.example.com"); err == nil {
		t.Fatal("an entry with a user parsed")
	}
	// The help says the default.
	var p2 EndpointPolicy
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	var help bytes.Buffer
	fs.SetOutput(&help)
	p2.BindFlags(fs)
	fs.PrintDefaults()
	if !strings.Contains(help.String(), "(default true)") {
		t.Fatalf("help:\n%s", help.String())
	}
}
