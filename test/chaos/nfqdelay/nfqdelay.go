// Package nfqdelay delays packets in a network namespace for tests: the
// delay of chaos-mesh's NetworkChaos (netem's `delay`), on a kernel whose
// tc has no netem qdisc but whose netfilter has NFQUEUE.
//
// An iptables rule in the namespace sends packets to a netfilter queue
// (`-j NFQUEUE --queue-num N --queue-bypass`); a Delayer bound to that
// queue gives each packet its verdict (accept) only once it has waited the
// delay, in arrival order, so a TCP stream keeps its order. The queue
// protocol is the kernel's nfnetlink_queue (include/uapi/linux/netfilter/
// nfnetlink_queue.h): BIND and PARAMS config commands, then one PACKET
// message per packet and one VERDICT message back, over a NETLINK_NETFILTER
// socket. A socket belongs to the network namespace it was created in, so
// Start creates it inside the namespace and only then leaves it.
//
// With --queue-bypass in the rule, packets pass undelayed while no Delayer
// is bound (before Start, after Stop), and the queue fails open when full
// (NFQA_CFG_F_FAIL_OPEN): a test that forgets to remove the rule slows
// nothing down for good.
package nfqdelay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// nfnetlink_queue constants (include/uapi/linux/netfilter/nfnetlink.h and
// nfnetlink_queue.h).
const (
	subsysQueue = 3 // NFNL_SUBSYS_QUEUE

	msgPacket  = subsysQueue<<8 | 0 // NFQNL_MSG_PACKET
	msgVerdict = subsysQueue<<8 | 1 // NFQNL_MSG_VERDICT
	msgConfig  = subsysQueue<<8 | 2 // NFQNL_MSG_CONFIG

	attrCfgCmd     = 1 // NFQA_CFG_CMD: struct nfqnl_msg_config_cmd
	attrCfgParams  = 2 // NFQA_CFG_PARAMS: struct nfqnl_msg_config_params
	attrCfgMaxLen  = 3 // NFQA_CFG_QUEUE_MAXLEN: __be32
	attrCfgMask    = 4 // NFQA_CFG_MASK: __be32
	attrCfgFlags   = 5 // NFQA_CFG_FLAGS: __be32
	cmdBind        = 1 // NFQNL_CFG_CMD_BIND
	copyMeta       = 1 // NFQNL_COPY_META: the packet's header only, no payload
	flagFailOpen   = 1 // NFQA_CFG_F_FAIL_OPEN
	attrPacketHdr  = 1 // NFQA_PACKET_HDR: struct nfqnl_msg_packet_hdr
	attrVerdictHdr = 2 // NFQA_VERDICT_HDR: struct nfqnl_msg_verdict_hdr
	verdictAccept  = 1 // NF_ACCEPT

	// queueMaxLen is how many packets may wait in the kernel at once;
	// beyond it the queue fails open (accepts undelayed).
	queueMaxLen = 16384
)

// Delayer holds every packet of one netfilter queue for a fixed delay.
type Delayer struct {
	fd    int
	queue uint16
	delay time.Duration

	held chan heldPacket
	done chan struct{}
	wg   sync.WaitGroup

	mu  sync.Mutex
	err error // the first error of the reader or the sender
}

type heldPacket struct {
	id  uint32
	due time.Time
}

// Start binds queue in the network namespace at nsPath (for example
// /var/run/netns/NAME, or /proc/PID/ns/net; "" for the caller's own) and
// delays each of its packets by delay. Errors: the namespace cannot be
// entered, or the kernel refuses the socket or the bind (no
// nfnetlink_queue, another listener on the queue, not root).
func Start(nsPath string, queue uint16, delay time.Duration) (*Delayer, error) {
	fd, err := socketIn(nsPath)
	if err != nil {
		return nil, err
	}
	d := &Delayer{fd: fd, queue: queue, delay: delay, held: make(chan heldPacket, queueMaxLen), done: make(chan struct{})}
	// A large receive buffer: a burst of packets must not overflow it
	// (ENOBUFS), which would leave those packets queued without verdicts.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	// Reads wake up at least this often, so that Stop is seen (closing a
	// netlink socket does not wake a blocked read).
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200_000}); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("nfqdelay: SO_RCVTIMEO: %w", err)
	}
	if err := d.configure(); err != nil {
		_ = unix.Close(fd)
		return nil, err
	}
	d.wg.Add(2)
	go d.read()
	go d.release()
	return d, nil
}

// socketIn creates a NETLINK_NETFILTER socket in the namespace at nsPath,
// on an OS thread that enters it and is never used again (the goroutine
// ends locked, so the runtime ends the thread).
func socketIn(nsPath string) (int, error) {
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		if nsPath != "" {
			f, err := os.Open(nsPath)
			if err != nil {
				ch <- result{-1, err}
				return
			}
			err = unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
			_ = f.Close()
			if err != nil {
				ch <- result{-1, fmt.Errorf("nfqdelay: entering %s: %w", nsPath, err)}
				return
			}
		}
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		if err != nil {
			ch <- result{-1, fmt.Errorf("nfqdelay: netlink socket: %w", err)}
			return
		}
		if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
			_ = unix.Close(fd)
			ch <- result{-1, fmt.Errorf("nfqdelay: binding the netlink socket: %w", err)}
			return
		}
		ch <- result{fd, nil}
	}()
	r := <-ch
	return r.fd, r.err
}

// configure binds the queue, asks for packet headers only, and makes the
// queue long and fail-open; each request is acknowledged (NLM_F_ACK) so
// that a refusal (EBUSY: another listener) is an error here.
func (d *Delayer) configure() error {
	cmd := []byte{cmdBind, 0, 0, 0} // command, pad, pf (unused by BIND)
	params := make([]byte, 5)
	binary.BigEndian.PutUint32(params, 0) // copy_range
	params[4] = copyMeta
	reqs := [][]byte{
		attr(attrCfgCmd, cmd),
		attr(attrCfgParams, params),
		append(attr(attrCfgMaxLen, be32(queueMaxLen)), append(attr(attrCfgMask, be32(flagFailOpen)), attr(attrCfgFlags, be32(flagFailOpen))...)...),
	}
	for i, body := range reqs {
		seq := uint32(i + 1)
		if err := d.send(msgConfig, unix.NLM_F_REQUEST|unix.NLM_F_ACK, seq, body); err != nil {
			return err
		}
		if err := d.ack(seq); err != nil {
			return fmt.Errorf("nfqdelay: configuring queue %d: %w", d.queue, err)
		}
	}
	return nil
}

// ack reads messages until the acknowledgement of seq (an NLMSG_ERROR with
// error 0) and returns the error it carries.
func (d *Delayer) ack(seq uint32) error {
	buf := make([]byte, 8192)
	for {
		n, _, err := unix.Recvfrom(d.fd, buf, 0)
		if err != nil {
			return err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.Header.Type == unix.NLMSG_ERROR && m.Header.Seq == seq && len(m.Data) >= 4 {
				if errno := int32(binary.NativeEndian.Uint32(m.Data)); errno != 0 {
					return unix.Errno(-errno)
				}
				return nil
			}
		}
	}
}

// read receives the queue's packets and hands them to release with the
// time each is due.
func (d *Delayer) read() {
	defer d.wg.Done()
	defer close(d.held)
	buf := make([]byte, 1<<16)
	for {
		select {
		case <-d.done:
			return
		default:
		}
		n, _, err := unix.Recvfrom(d.fd, buf, 0)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue // the read timeout: look at done again
			}
			if errors.Is(err, unix.ENOBUFS) {
				// Some packet messages were lost to the buffer: those
				// packets wait in the kernel until the queue is unbound.
				continue
			}
			d.fail(fmt.Errorf("nfqdelay: receiving: %w", err))
			return
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			d.fail(err)
			return
		}
		now := time.Now()
		for _, m := range msgs {
			if m.Header.Type != msgPacket || len(m.Data) < 4 {
				continue
			}
			if id, ok := packetID(m.Data[4:]); ok {
				select {
				case d.held <- heldPacket{id: id, due: now.Add(d.delay)}:
				case <-d.done:
					return // release may have returned with held full
				}
			}
		}
	}
}

// release gives each held packet its accept verdict once it is due.
func (d *Delayer) release() {
	defer d.wg.Done()
	for p := range d.held {
		if wait := time.Until(p.due); wait > 0 {
			select {
			case <-time.After(wait):
			case <-d.done:
				return
			}
		}
		if err := d.verdict(p.id); err != nil {
			d.fail(err)
		}
	}
}

// verdict accepts packet id.
func (d *Delayer) verdict(id uint32) error {
	v := make([]byte, 8)
	binary.BigEndian.PutUint32(v, verdictAccept)
	binary.BigEndian.PutUint32(v[4:], id)
	return d.send(msgVerdict, unix.NLM_F_REQUEST, 0, attr(attrVerdictHdr, v))
}

// send writes one nfnetlink message of type typ for the queue: the netlink
// header, nfgenmsg (family AF_UNSPEC, version 0, the queue number in
// network order), then the attributes in body.
func (d *Delayer) send(typ uint16, flags uint16, seq uint32, body []byte) error {
	msg := make([]byte, unix.NLMSG_HDRLEN+4, unix.NLMSG_HDRLEN+4+len(body))
	binary.NativeEndian.PutUint32(msg[0:], uint32(unix.NLMSG_HDRLEN+4+len(body)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], flags)
	binary.NativeEndian.PutUint32(msg[8:], seq)
	msg[unix.NLMSG_HDRLEN] = unix.AF_UNSPEC
	binary.BigEndian.PutUint16(msg[unix.NLMSG_HDRLEN+2:], d.queue)
	msg = append(msg, body...)
	return unix.Sendto(d.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
}

// Stop waits for the Delayer's goroutines, then unbinds the queue
// (closing the socket does); packets still held get no verdict from it and
// the kernel drops them with the queue (--queue-bypass then lets new ones
// through). It returns the first error the Delayer met, if any.
func (d *Delayer) Stop() error {
	close(d.done)
	d.wg.Wait()
	err := unix.Close(d.fd)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return d.err
	}
	if err != nil {
		return fmt.Errorf("nfqdelay: closing: %w", err)
	}
	return nil
}

func (d *Delayer) fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err == nil {
		d.err = err
	}
}

// packetID finds NFQA_PACKET_HDR among attrs and returns its packet_id.
func packetID(attrs []byte) (uint32, bool) {
	for len(attrs) >= 4 {
		l := int(binary.NativeEndian.Uint16(attrs))
		typ := binary.NativeEndian.Uint16(attrs[2:]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
		if l < 4 || l > len(attrs) {
			return 0, false
		}
		if typ == attrPacketHdr && l >= 8 {
			return binary.BigEndian.Uint32(attrs[4:]), true
		}
		next := (l + unix.NLA_ALIGNTO - 1) &^ (unix.NLA_ALIGNTO - 1)
		if next > len(attrs) {
			return 0, false
		}
		attrs = attrs[next:]
	}
	return 0, false
}

// attr encodes one netlink attribute, padded to 4 bytes.
func attr(typ uint16, payload []byte) []byte {
	l := 4 + len(payload)
	b := make([]byte, (l+unix.NLA_ALIGNTO-1)&^(unix.NLA_ALIGNTO-1))
	binary.NativeEndian.PutUint16(b, uint16(l))
	binary.NativeEndian.PutUint16(b[2:], typ)
	copy(b[4:], payload)
	return b
}

func be32(v uint32) []byte {
	b := make([]byte, 4)
	binary.BigEndian.PutUint32(b, v)
	return b
}
