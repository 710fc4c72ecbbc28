package topology

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"

	"github.com/redis-operator/redis-operator/controllers/tlscerts"
)

// TLSFiles are the paths, on the nodes, of the certificate, its key and the
// CA bundle, as redis.conf's tls-cert-file, tls-key-file and
// tls-ca-cert-file name them.
type TLSFiles struct {
	Cert, Key, CA string
}

// ServedSerial dials addr over TLS (Options.TLS) and returns the serial
// number of the certificate the node presents, in tlscerts.Serial's form.
// A handshake failure (a node whose certificate does not chain to the CA,
// or that refuses the client certificate) is an error.
func (e *Engine) ServedSerial(ctx context.Context, addr string) (string, error) {
	if e.opts.TLS == nil {
		return "", errors.New("the engine has no TLS configuration")
	}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: e.opts.DialTimeout}, Config: e.opts.TLS}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("TLS handshake with %s: %w", addr, err)
	}
	defer conn.Close()
	certs := conn.(*tls.Conn).ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return "", fmt.Errorf("%s presented no certificate", addr)
	}
	return tlscerts.Serial(certs[0]), nil
}

// ReloadTLS makes each node of addrs serve the certificate with serial:
// a node that presents another one gets CONFIG SET tls-cert-file,
// tls-key-file and tls-ca-cert-file with files' paths, which makes Redis
// 7.0 read the three files again and use them for every new connection
// without a restart (even when the paths are unchanged: Redis flags these
// parameters volatile; checked on redis-server 7.0.15), and is dialled
// again. It returns the nodes that still present another certificate (the
// files on the node are not the new ones yet: a Secret volume is updated
// by the kubelet a while after the Secret), or an error naming the first
// node that could not be reached or refused the CONFIG SET.
func (e *Engine) ReloadTLS(ctx context.Context, addrs []string, serial string, files TLSFiles) (pending []string, err error) {
	c := e.newConns()
	defer c.close()
	for _, addr := range addrs {
		got, err := e.ServedSerial(ctx, addr)
		if err != nil {
			return nil, err
		}
		if got == serial {
			continue
		}
		e.log.Info("Reloading TLS certificate", "addr", addr, "served", got, "serial", serial)
		if err := c.get(addr).Do(ctx, "CONFIG", "SET", "tls-cert-file", files.Cert, "tls-key-file", files.Key,
			"tls-ca-cert-file", files.CA).Err(); err != nil {
			return nil, fmt.Errorf("CONFIG SET tls-cert-file on %s: %w", addr, err)
		}
		if got, err = e.ServedSerial(ctx, addr); err != nil {
			return nil, err
		}
		if got != serial {
			pending = append(pending, addr)
		}
	}
	return pending, nil
}
