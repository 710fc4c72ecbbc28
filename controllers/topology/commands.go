package topology

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// commandHook is the go-redis hook behind Options.OnCommand: it reports every command a
// client is about to send, alone or in a pipeline, including the HELLO 2 AUTH (or AUTH) with
// which go-redis sets up a new connection through the client's hooks. A command whose
// connection cannot be dialled is reported too: it counts what the engine asked of a node.
type commandHook func(name string)

func (h commandHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h commandHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h(commandName(cmd))
		return next(ctx, cmd)
	}
}

func (h commandHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h(commandName(cmd))
		}
		return next(ctx, cmds)
	}
}

// containerCommands are Redis 7's commands with subcommands, which INFO commandstats counts
// per subcommand ("cmdstat_cluster|nodes", "cmdstat_memory|usage"; COMMAND DOCS lists them).
var containerCommands = map[string]bool{"acl": true, "client": true, "cluster": true, "command": true, "config": true,
	"function": true, "latency": true, "memory": true, "module": true, "object": true, "pubsub": true, "script": true,
	"slowlog": true, "xgroup": true, "xinfo": true}

// commandName is cmd's name as INFO commandstats spells it: lower case, and for a container
// command "name|subcommand".
func commandName(cmd redis.Cmder) string {
	name := strings.ToLower(cmd.Name())
	if args := cmd.Args(); containerCommands[name] && len(args) > 1 {
		if sub, ok := args[1].(string); ok {
			return name + "|" + strings.ToLower(sub)
		}
	}
	return name
}
