// Package backup takes and restores backups of a Redis Cluster in an
// S3-compatible object store: every shard's RDB, read from a node over the
// replication protocol and streamed to the store without touching the
// node's disk, and a manifest written last.
package backup

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// eofMarkLen is the length of the delimiter a diskless full sync frames the
// RDB with: the master answers SYNC with "$EOF:<40 random bytes>\r\n", sends
// the RDB and then the same 40 bytes (Redis replication.c,
// CONFIG_RUN_ID_SIZE; how replicas with "capa eof" read it).
const eofMarkLen = 40

// rdbMagic starts every RDB file: "REDIS" and a 4-digit format version
// (rdb.c, rdbSaveInfo: "REDIS%04d").
const rdbMagic = "REDIS"

// RDBStream is one node's RDB as it arrives over a replication connection.
// Read returns the RDB payload only (neither the SYNC reply's header nor
// the EOF mark) and io.EOF once the whole RDB has arrived. Close closes
// the connection; a stream closed before io.EOF ends the node's child
// process that was producing it.
type RDBStream struct {
	conn   net.Conn
	r      *bufio.Reader
	mark   []byte // the EOF mark, or nil with a known length
	remain int64  // bytes left with a known length ($<n>)
	held   []byte // the last up to eofMarkLen bytes read, not yet returned
	done   bool
	first  []byte // the first bytes returned, to check the magic
	buf    []byte // scratch space of read
	idle   time.Duration
}

// DialRDB connects to the Redis node at addr (host:port), authenticates
// with password when it is not empty (AUTH, the default user), and asks it
// for a full sync in the way `redis-cli --rdb` does: REPLCONF capa eof
// (so that a node with repl-diskless-sync yes streams the RDB from its
// forked child straight to the socket, with no file on its disk), REPLCONF
// rdb-only 1 (Redis 7.0+: the RDB only, no replication stream after it;
// an older node's error is ignored) and SYNC. It returns once the node
// has answered SYNC with the payload's header; the RDB follows on Read.
// idle bounds every read (the node sends a newline every second while its
// child starts, so a silent connection is a dead one).
//
// Errors: the dial's, an authentication error (the node's -ERR/-WRONGPASS
// line), or a SYNC refusal (for example -NOPERM, or -ERR on a node that
// cannot serve a sync).
func DialRDB(ctx context.Context, addr, password string, idle time.Duration) (*RDBStream, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", addr, err)
	}
	s := &RDBStream{conn: conn, r: bufio.NewReaderSize(conn, 64<<10), idle: idle}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := s.handshake(password); err != nil {
		_ = conn.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("asking %s for its RDB: %w", addr, ctx.Err())
		}
		return nil, fmt.Errorf("asking %s for its RDB: %w", addr, err)
	}
	return s, nil
}

func (s *RDBStream) handshake(password string) error {
	if password != "" {
		if err := s.command(true, "AUTH", password); err != nil {
			return fmt.Errorf("AUTH: %w", err)
		}
	}
	if err := s.command(true, "REPLCONF", "capa", "eof"); err != nil {
		return fmt.Errorf("REPLCONF capa eof: %w", err)
	}
	if err := s.command(false, "REPLCONF", "rdb-only", "1"); err != nil {
		return fmt.Errorf("REPLCONF rdb-only: %w", err)
	}
	if err := s.send("SYNC"); err != nil {
		return err
	}
	for {
		line, err := s.line()
		if err != nil {
			return fmt.Errorf("waiting for the SYNC reply: %w", err)
		}
		switch {
		case line == "":
			continue // a keepalive newline while the node's child starts
		case strings.HasPrefix(line, "$EOF:") && len(line) == 5+eofMarkLen:
			s.mark = []byte(line[5:])
			return nil
		case strings.HasPrefix(line, "$"):
			n, err := strconv.ParseInt(line[1:], 10, 64)
			if err != nil || n < 0 {
				return fmt.Errorf("unexpected SYNC reply %q", line)
			}
			s.remain = n
			return nil
		case strings.HasPrefix(line, "-"):
			return fmt.Errorf("SYNC refused: %s", line[1:])
		default:
			return fmt.Errorf("unexpected SYNC reply %q", line)
		}
	}
}

// command sends args as a RESP array and reads a one-line reply; an error
// reply is an error only when strict.
func (s *RDBStream) command(strict bool, args ...string) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if err := s.write(b.Bytes()); err != nil {
		return err
	}
	line, err := s.line()
	if err != nil {
		return err
	}
	if strings.HasPrefix(line, "-") && strict {
		return errors.New(line[1:])
	}
	return nil
}

func (s *RDBStream) send(inline string) error { return s.write([]byte(inline + "\r\n")) }

func (s *RDBStream) write(b []byte) error {
	_ = s.conn.SetWriteDeadline(time.Now().Add(s.idle))
	_, err := s.conn.Write(b)
	return err
}

// line reads one reply line without its CRLF (or LF, for keepalives).
func (s *RDBStream) line() (string, error) {
	_ = s.conn.SetReadDeadline(time.Now().Add(s.idle))
	l, err := s.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimRight(l, "\r\n"), nil
}

// Read returns RDB bytes. Errors: io.EOF at the end of the RDB;
// io.ErrUnexpectedEOF when the connection closes first; a timeout when
// the node sends nothing for the idle time; an error when the payload
// does not start with the RDB magic.
func (s *RDBStream) Read(p []byte) (int, error) {
	if s.done {
		return 0, io.EOF
	}
	n, err := s.read(p)
	if n > 0 && len(s.first) < len(rdbMagic) {
		s.first = append(s.first, p[:min(n, len(rdbMagic)-len(s.first))]...)
		if !bytes.HasPrefix([]byte(rdbMagic), s.first) {
			return 0, fmt.Errorf("the sync payload is not an RDB (starts with %q)", s.first)
		}
	}
	return n, err
}

func (s *RDBStream) read(p []byte) (int, error) {
	_ = s.conn.SetReadDeadline(time.Now().Add(s.idle))
	if s.mark == nil {
		if s.remain == 0 {
			s.done = true
			return 0, io.EOF
		}
		n, err := s.r.Read(p[:min(int64(len(p)), s.remain)])
		s.remain -= int64(n)
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return n, err
	}
	// With an EOF mark the last eofMarkLen bytes seen are held back until
	// more arrive: they may be the mark.
	if cap(s.buf) < len(p)+eofMarkLen {
		s.buf = make([]byte, len(p)+eofMarkLen)
	}
	buf := s.buf[:len(p)+eofMarkLen]
	copy(buf, s.held)
	n, err := s.r.Read(buf[len(s.held):])
	total := len(s.held) + n
	if total >= eofMarkLen && bytes.Equal(buf[total-eofMarkLen:total], s.mark) {
		s.done = true
		out := copy(p, buf[:total-eofMarkLen])
		s.held = nil
		return out, nil
	}
	if errors.Is(err, io.EOF) {
		return 0, io.ErrUnexpectedEOF
	}
	keep := min(total, eofMarkLen)
	out := copy(p, buf[:total-keep])
	s.held = append(s.held[:0], buf[total-keep:total]...)
	return out, err
}

// Close closes the replication connection.
func (s *RDBStream) Close() error { return s.conn.Close() }
