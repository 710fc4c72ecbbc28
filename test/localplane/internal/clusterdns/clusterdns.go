// Package clusterdns is the local plane's cluster DNS: an authoritative
// server for the cluster domain, answering from the API server's Services
// and EndpointSlices the names that Kubernetes' DNS specification
// (github.com/kubernetes/dns, docs/specification.md) defines for IPv4:
//
//	<svc>.<ns>.svc.<domain>             A: the ClusterIP; for a headless
//	                                    Service, the ready endpoints'
//	                                    addresses (all endpoints when it
//	                                    publishes not-ready addresses)
//	<hostname>.<svc>.<ns>.svc.<domain>  A: the endpoint with that hostname
//	                                    (pods with hostname and subdomain,
//	                                    StatefulSet pods)
//
// Everything else gets NXDOMAIN (there is no upstream: pods on the plane
// reach nothing outside it). Answers have TTL 5 s. It serves UDP and TCP on
// one address.
package clusterdns

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
)

// Domain is the cluster domain.
const Domain = "cluster.local"

const ttl = 5 // seconds

// Server is a running cluster DNS server.
type Server struct {
	services  corev1listers.ServiceLister
	slices    discoverylisters.EndpointSliceLister
	servers   []*dns.Server
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	listenErr chan error
}

// Start serves DNS on addr (host:port, UDP and TCP) once its caches of
// Services and EndpointSlices have synced. Stop ends it.
func Start(ctx context.Context, client kubernetes.Interface, addr string) (*Server, error) {
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactory(client, 10*time.Minute)
	s := &Server{
		services: factory.Core().V1().Services().Lister(),
		slices:   factory.Discovery().V1().EndpointSlices().Lister(),
		cancel:   cancel,
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			cancel()
			return nil, fmt.Errorf("clusterdns: cache of %v did not sync", typ)
		}
	}
	mux := dns.NewServeMux()
	mux.HandleFunc(Domain+".", s.serve)
	mux.HandleFunc(".", refuse)
	s.listenErr = make(chan error, 2)
	for _, network := range []string{"udp", "tcp"} {
		started := make(chan struct{})
		srv := &dns.Server{Addr: addr, Net: network, Handler: mux, NotifyStartedFunc: func() { close(started) }}
		s.servers = append(s.servers, srv)
		s.wg.Go(func() {
			if err := srv.ListenAndServe(); err != nil {
				s.listenErr <- fmt.Errorf("clusterdns: %s %s: %w", network, addr, err)
			}
		})
		select {
		case <-started:
		case err := <-s.listenErr:
			s.Stop()
			return nil, err
		}
	}
	go func() {
		<-ctx.Done()
		factory.Shutdown()
	}()
	return s, nil
}

// Stop shuts the server down and waits for it.
func (s *Server) Stop() {
	for _, srv := range s.servers {
		_ = srv.Shutdown()
	}
	s.wg.Wait()
	s.cancel()
}

func refuse(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetRcode(r, dns.RcodeRefused)
	_ = w.WriteMsg(m)
}

func (s *Server) serve(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	if len(r.Question) != 1 {
		m.SetRcode(r, dns.RcodeFormatError)
		_ = w.WriteMsg(m)
		return
	}
	q := r.Question[0]
	ips, found := s.lookup(q.Name)
	switch {
	case !found:
		m.SetRcode(r, dns.RcodeNameError)
	case q.Qtype == dns.TypeA || q.Qtype == dns.TypeANY:
		for _, ip := range ips {
			m.Answer = append(m.Answer, &dns.A{
				Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl},
				A:   ip,
			})
		}
	}
	_ = w.WriteMsg(m)
}

// lookup returns the IPv4 addresses of a name in the cluster domain and
// whether the name exists.
func (s *Server) lookup(name string) ([]net.IP, bool) {
	rest, ok := strings.CutSuffix(strings.ToLower(dns.Fqdn(name)), ".svc."+Domain+".")
	if !ok {
		return nil, false
	}
	labels := strings.Split(rest, ".")
	switch len(labels) {
	case 2:
		return s.service(labels[1], labels[0])
	case 3:
		return s.endpoint(labels[2], labels[1], labels[0])
	}
	return nil, false
}

func (s *Server) service(namespace, name string) ([]net.IP, bool) {
	svc, err := s.services.Services(namespace).Get(name)
	if err != nil {
		return nil, false
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		ip := net.ParseIP(svc.Spec.ClusterIP).To4()
		if ip == nil {
			return nil, true
		}
		return []net.IP{ip}, true
	}
	var out []net.IP
	s.eachEndpoint(svc, func(ep discoveryv1.Endpoint, ip net.IP) { out = append(out, ip) })
	return out, true
}

func (s *Server) endpoint(namespace, service, hostname string) ([]net.IP, bool) {
	svc, err := s.services.Services(namespace).Get(service)
	if err != nil {
		return nil, false
	}
	var out []net.IP
	s.eachEndpoint(svc, func(ep discoveryv1.Endpoint, ip net.IP) {
		if ep.Hostname != nil && *ep.Hostname == hostname {
			out = append(out, ip)
		}
	})
	return out, len(out) > 0
}

// eachEndpoint calls f for every IPv4 address of svc's endpoints that DNS
// publishes: ready ones, or all when the Service publishes not-ready
// addresses.
func (s *Server) eachEndpoint(svc *corev1.Service, f func(discoveryv1.Endpoint, net.IP)) {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svc.Name})
	slices, err := s.slices.EndpointSlices(svc.Namespace).List(sel)
	if err != nil {
		return
	}
	seen := map[string]bool{}
	for _, sl := range slices {
		if sl.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		for _, ep := range sl.Endpoints {
			ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready
			if !ready && !svc.Spec.PublishNotReadyAddresses {
				continue
			}
			for _, a := range ep.Addresses {
				ip := net.ParseIP(a).To4()
				if ip == nil || seen[a] {
					continue
				}
				seen[a] = true
				f(ep, ip)
			}
		}
	}
}
