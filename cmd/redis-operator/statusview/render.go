package statusview

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis-operator/redis-operator/controllers/topology"
)

// messageWidth is where the tables cut condition and event messages (in
// runes); the JSON form keeps them whole.
const messageWidth = 110

// RenderJSON writes r as indented JSON followed by a newline.
func RenderJSON(w io.Writer, r Report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// RenderText writes r for a person: a summary, then the shards, the
// nodes, the conditions and the events as aligned tables. Ages count from
// now.
func RenderText(w io.Writer, r Report, now time.Time) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "RedisCluster %s/%s\n", r.Namespace, r.Name)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "  %s:\t%s\n", k, v) }
	row("Phase", fmt.Sprintf("%s (generation %d, observed %d)", orDash(r.Phase), r.Generation, r.ObservedGeneration))
	health := orDash(r.Health)
	if r.HealthMessage != "" {
		health += ": " + r.HealthMessage
	}
	row("Health", cut(health))
	spec := fmt.Sprintf("%d shards × %d %s, image %s", r.Shards, r.ReplicasPerShard, plural(int(r.ReplicasPerShard), "replica"), r.Image)
	if r.Paused {
		spec += ", paused"
	}
	row("Spec", spec)
	row("Pods", fmt.Sprintf("%d/%d ready", r.PodsReady, r.Pods))
	if c := r.Cluster; c != nil {
		row("Cluster", fmt.Sprintf("state %s, slots %d assigned / %d ok / %d pfail / %d fail, %d known nodes, size %d, epoch %d (CLUSTER INFO of %s)",
			c.State, c.SlotsAssigned, c.SlotsOK, c.SlotsPFail, c.SlotsFail, c.KnownNodes, c.Size, c.CurrentEpoch, c.Source))
	} else {
		row("Cluster", "no master answered")
	}
	row("Slots served", fmt.Sprintf("%d/%d", r.SlotsServed, topology.NumSlots))
	row("Keys", strconv.FormatInt(r.Keys, 10))
	row("Credentials", orDash(r.Credentials))
	if m := r.Migration; m != nil {
		row("Migration", fmt.Sprintf("%d/%d slots moved, %d keys", m.SlotsMoved, m.SlotsTotal, m.KeysMoved))
	} else {
		row("Migration", "-")
	}
	if len(r.LeavingShards) > 0 {
		row("Leaving", strings.Join(r.LeavingShards, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	b.WriteString("\nShards\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  SHARD\tMASTER\tSLOTS\tCOUNT\tKEYS\tOPEN SLOTS")
	for _, s := range r.ShardList {
		name := s.Name
		if s.Leaving {
			name += " (leaving)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\t%s\n", name, orDash(s.Master), orDash(strings.Join(s.Slots, ",")),
			s.SlotCount, s.Keys, openSlotsText(s.OpenSlots))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	b.WriteString("\nNodes\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  POD\tROLE\tNODE ID\tK8S NODE\tIP\tREADY\tKEYS\tMEMORY (used/max)\tLAG\tFLAGS")
	var errs []string
	for _, s := range r.ShardList {
		for _, n := range s.Nodes {
			ready := "no"
			if n.Ready {
				ready = "yes"
			}
			if n.PodPhase != "Running" {
				ready += " (" + orDash(n.PodPhase) + ")"
			}
			id := n.NodeID
			if len(id) > 8 {
				id = id[:8]
			}
			mem, lag := "-", "-"
			if n.Role != "" {
				mem = memoryText(n.UsedMemory, n.MaxMemory)
			}
			if n.LagBytes != nil {
				lag = bytesText(*n.LagBytes)
			}
			if n.Role == "replica" && !n.MasterLinkUp {
				lag += " (link down)"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", n.Pod, orDash(n.Role), orDash(id), orDash(n.K8sNode),
				orDash(n.IP), ready, n.Keys, mem, lag, orDash(n.Flags))
			if n.Error != "" {
				errs = append(errs, n.Pod+": "+n.Error)
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, e := range errs {
		fmt.Fprintf(&b, "  unreachable %s\n", cut(e))
	}

	b.WriteString("\nConditions\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  TYPE\tSTATUS\tREASON\tAGE\tMESSAGE")
	for _, c := range r.Conditions {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, age(now, c.LastTransitionTime), orDash(cut(c.Message)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	b.WriteString("\nEvents (newest first)\n")
	if len(r.Events) == 0 {
		b.WriteString("  none\n")
	} else {
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  AGE\tTYPE\tREASON\tMESSAGE")
		for _, e := range r.Events {
			msg := e.Message
			if e.Count > 1 {
				msg = fmt.Sprintf("(×%d) %s", e.Count, msg)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", age(now, e.Time), e.Type, e.Reason, cut(msg))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// cut shortens s to messageWidth runes, marking the cut with "…".
func cut(s string) string {
	r := []rune(s)
	if len(r) <= messageWidth {
		return s
	}
	return string(r[:messageWidth-1]) + "…"
}

func openSlotsText(list []OpenSlot) string {
	if len(list) == 0 {
		return "-"
	}
	parts := make([]string, len(list))
	for i, o := range list {
		arrow := "->"
		if o.State == "importing" {
			arrow = "<-"
		}
		parts[i] = fmt.Sprintf("%d%s%s", o.Slot, arrow, o.Peer)
	}
	return strings.Join(parts, " ")
}

// memoryText is "1.5MiB/100.0MiB (1%)", or "1.5MiB/no limit" when maxmemory is 0.
func memoryText(used, max int64) string {
	if max <= 0 {
		return bytesText(used) + "/no limit"
	}
	return fmt.Sprintf("%s/%s (%d%%)", bytesText(used), bytesText(max), used*100/max)
}

// bytesText formats n bytes with binary prefixes: "512B", "1.5KiB", "2.0GiB".
func bytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + "B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// age is kubectl's short form of now - t: "45s", "12m", "5h", "3d"; "-"
// for a zero time.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := max(now.Sub(t), 0)
	switch {
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}
