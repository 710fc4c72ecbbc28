package topology

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// commandHook is the go-redis hook behind Options.OnCommand: it reports every command a
// client sends, alone or in a pipeline (go-redis authenticates a new connection with HELLO 2
// AUTH, or AUTH, in a pipeline through the client's hooks), before sending it.
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

// containerCommands are the commands INFO commandstats counts per subcommand
// ("cmdstat_cluster|nodes"), among those the engine sends.
var containerCommands = map[string]bool{"cluster": true, "config": true, "client": true, "acl": true}

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
