package resp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/yuebing/yuebing/tier"
)

// command is one entry of the command table.
type command struct {
	name  string
	arity int // as Redis: n exactly n arguments (the name included), -n at least n
	flags []string
	// Key positions for COMMAND INFO: first, last (-1: the last argument)
	// and step; 0 when the command takes no key.
	first, last, step int
	group, since      string
	summary           string

	noAuth bool // allowed before AUTH
	admin  bool // admin principals only

	// fn runs with every argument read. stream runs instead, for commands
	// that read their arguments themselves (SET and MSET stream values
	// into the store); it is called right after the name was read.
	fn     func(c *conn, args [][]byte) error
	stream func(c *conn, n int) error
}

var (
	// commandList is the table in COMMAND's order. It is filled in init
	// because COMMAND's handler reads it.
	commandList []*command
	commands    map[string]*command
)

func init() {
	commandList = commandTable()
	commands = make(map[string]*command, len(commandList))
	for _, cmd := range commandList {
		commands[cmd.name] = cmd
	}
}

// lookupCommand finds a command by its name in any case.
func lookupCommand(name []byte) *command {
	if len(name) > 32 {
		return nil
	}
	var buf [32]byte
	lower := buf[:len(name)]
	for i, b := range name {
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		lower[i] = b
	}
	return commands[string(lower)]
}

// exec reads and runs one command of n arguments. It returns an error only
// when the connection must close (I/O, protocol); a command's failure is a
// reply.
func (c *conn) exec(n int) error {
	name, big, err := c.r.next()
	if err != nil {
		return err
	}
	if big > 0 {
		if err := c.r.skipRest(); err != nil {
			return err
		}
		c.writeError("ERR unknown command, with a name of " + fmt.Sprint(big) + " bytes")
		c.abortTx()
		return nil
	}
	cmd := lookupCommand(name)
	if cmd == nil {
		c.abortTx()
		return c.unknown(name)
	}
	// Redis's order: an unknown command, then a wrong arity, then a
	// missing AUTH.
	if cmd.arity > 0 && n != cmd.arity || cmd.arity < 0 && n < -cmd.arity {
		if err := c.r.skipRest(); err != nil {
			return err
		}
		c.writeError("ERR wrong number of arguments for '" + cmd.name + "' command")
		c.abortTx()
		return nil
	}
	if !c.authed && !cmd.noAuth {
		if err := c.r.skipRest(); err != nil {
			return err
		}
		c.writeError("NOAUTH Authentication required.")
		return nil
	}
	// Counted once run, as Redis does: INFO does not count itself.
	defer c.s.stats.commands.Add(1)
	start := time.Now()
	if lat := c.s.opts.Latency; lat != nil {
		defer func() { lat(time.Since(start)) }()
	}
	c.mu.Lock()
	c.mu.cmd, c.mu.active = cmd.name, start
	c.mu.Unlock()
	if cmd.admin && !c.principal.IsAdmin() {
		if err := c.r.skipRest(); err != nil {
			return err
		}
		c.writeError("NOPERM this user has no permissions to run the '" + cmd.name + "' command")
		c.abortTx()
		return nil
	}
	if c.tx != nil && !txControl(cmd) {
		return c.queue(cmd, n)
	}
	if cmd.stream != nil {
		return cmd.stream(c, n)
	}
	args, tooLong, err := c.r.rest()
	if err != nil {
		return err
	}
	if tooLong {
		c.writeError(fmt.Sprintf("ERR the arguments of '%s' exceed the limit of %d bytes buffered per command (%d per argument)",
			cmd.name, c.s.opts.MaxRequestBytes, smallArg))
		return nil
	}
	return cmd.fn(c, args)
}

// unknown answers a command not in the table as Redis 7 does, quoting the
// first arguments.
func (c *conn) unknown(name []byte) error {
	var b strings.Builder
	b.WriteString("ERR unknown command '")
	b.Write(trunc(name, 128))
	b.WriteString("', with args beginning with: ")
	quoted := 0
	for c.r.remaining > 0 {
		arg, big, err := c.r.next()
		if err != nil {
			return err
		}
		if big > 0 {
			if err := c.r.skip(); err != nil {
				return err
			}
			continue
		}
		if quoted < 8 && b.Len() < 512 {
			b.WriteByte('\'')
			b.Write(trunc(arg, 128))
			b.WriteString("' ")
			quoted++
		}
	}
	c.writeError(b.String())
	return nil
}

func trunc(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

func eq(arg []byte, word string) bool { return bytes.EqualFold(arg, []byte(word)) }

// storeError turns a store failure into a reply.
func storeError(err error, size int64) string {
	switch {
	case errors.Is(err, tier.ErrTooLarge):
		return fmt.Sprintf("OOM value of %d bytes is larger than the store can hold", size)
	case errors.Is(err, tier.ErrNoSpace):
		return "ERR no space in the store: what it holds is pinned or being read; retry later"
	case errors.Is(err, tier.ErrClosed), errors.Is(err, context.Canceled):
		return "ERR server is shutting down"
	default:
		return "ERR store: " + err.Error()
	}
}

const (
	errSyntax = "ERR syntax error"
	errInt    = "ERR value is not an integer or out of range"
)

func commandTable() []*command {
	return []*command{
		{name: "ping", arity: -1, flags: []string{"fast"}, group: "connection", since: "1.0.0", summary: "Returns the server's liveliness response.", fn: cmdPing},
		{name: "echo", arity: 2, flags: []string{"fast"}, group: "connection", since: "1.0.0", summary: "Returns the given string.", fn: cmdEcho},
		{name: "auth", arity: -2, flags: []string{"noscript", "loading", "stale", "fast", "no_auth"}, group: "connection", since: "1.0.0", summary: "Authenticates the connection.", noAuth: true, fn: cmdAuth},
		{name: "hello", arity: -1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth"}, group: "connection", since: "6.0.0", summary: "Handshakes with the server.", noAuth: true, fn: cmdHello},
		{name: "select", arity: 2, flags: []string{"loading", "stale", "fast"}, group: "connection", since: "1.0.0", summary: "Changes the selected database (only 0 exists).", fn: cmdSelect},
		{name: "client", arity: -2, flags: []string{"noscript", "loading", "stale"}, group: "connection", since: "2.4.0", summary: "A container for client connection commands.", fn: cmdClient},
		{name: "multi", arity: 1, flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"}, group: "transactions", since: "1.2.0", summary: "Starts a transaction.", fn: cmdMulti},
		{name: "exec", arity: 1, flags: []string{"noscript", "loading", "stale", "skip_slowlog"}, group: "transactions", since: "1.2.0", summary: "Executes all commands in a transaction.", fn: cmdExec},
		{name: "watch", arity: -2, flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"}, first: 1, last: -1, step: 1, group: "transactions", since: "2.2.0", summary: "Monitors changes to keys to determine the execution of a transaction.", fn: cmdWatch},
		{name: "unwatch", arity: 1, flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"}, group: "transactions", since: "2.2.0", summary: "Forgets about watched keys of a transaction.", fn: cmdUnwatch},
		{name: "discard", arity: 1, flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"}, group: "transactions", since: "2.0.0", summary: "Discards a transaction.", fn: cmdDiscard},
		{name: "reset", arity: 1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth", "allow_busy"}, group: "connection", since: "6.2.0", summary: "Resets the connection.", noAuth: true, fn: cmdReset},
		{name: "quit", arity: -1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth"}, group: "connection", since: "1.0.0", summary: "Closes the connection.", noAuth: true, fn: cmdQuit},
		{name: "command", arity: -1, flags: []string{"loading", "stale"}, group: "server", since: "2.8.13", summary: "Returns detailed information about all commands.", fn: cmdCommand},
		{name: "info", arity: -1, flags: []string{"loading", "stale"}, group: "server", since: "1.0.0", summary: "Returns information and statistics about the server.", fn: cmdInfo},
		{name: "config", arity: -2, flags: []string{"admin", "noscript", "loading", "stale"}, group: "server", since: "2.0.0", summary: "Returns configuration parameters (read-only).", fn: cmdConfig},
		{name: "dbsize", arity: 1, flags: []string{"readonly", "fast"}, group: "server", since: "1.0.0", summary: "Returns the number of keys in the database.", fn: cmdDBSize},
		{name: "flushdb", arity: -1, flags: []string{"write"}, group: "server", since: "1.0.0", summary: "Removes all keys of the tenant.", admin: true, fn: cmdFlushDB},
		{name: "flushall", arity: -1, flags: []string{"write"}, group: "server", since: "1.0.0", summary: "Removes all Redis keys of all tenants.", admin: true, fn: cmdFlushAll},
		{name: "get", arity: 2, flags: []string{"readonly", "fast"}, first: 1, last: 1, step: 1, group: "string", since: "1.0.0", summary: "Returns the string value of a key.", fn: cmdGet},
		{name: "set", arity: -3, flags: []string{"write", "denyoom"}, first: 1, last: 1, step: 1, group: "string", since: "1.0.0", summary: "Sets the string value of a key.", stream: cmdSet},
		{name: "setex", arity: 4, flags: []string{"write", "denyoom"}, first: 1, last: 1, step: 1, group: "string", since: "2.0.0", summary: "Sets the string value and expiration time of a key.", stream: cmdSetEx(false)},
		{name: "psetex", arity: 4, flags: []string{"write", "denyoom"}, first: 1, last: 1, step: 1, group: "string", since: "2.6.0", summary: "Sets both string value and expiration time in milliseconds of a key.", stream: cmdSetEx(true)},
		{name: "setnx", arity: 3, flags: []string{"write", "denyoom", "fast"}, first: 1, last: 1, step: 1, group: "string", since: "1.0.0", summary: "Set the string value of a key only when the key doesn't exist.", stream: cmdSetNX},
		{name: "getset", arity: 3, flags: []string{"write", "denyoom", "fast"}, first: 1, last: 1, step: 1, group: "string", since: "1.0.0", summary: "Returns the previous string value of a key after setting it to a new value.", stream: cmdGetSet},
		{name: "mget", arity: -2, flags: []string{"readonly", "fast"}, first: 1, last: -1, step: 1, group: "string", since: "1.0.0", summary: "Atomically returns the string values of one or more keys.", fn: cmdMGet},
		{name: "mset", arity: -3, flags: []string{"write", "denyoom"}, first: 1, last: -1, step: 2, group: "string", since: "1.0.1", summary: "Sets the string values of one or more keys.", stream: cmdMSet},
		{name: "incr", arity: 2, flags: []string{"write", "denyoom", "fast"}, first: 1, last: 1, step: 1, group: "string", since: "1.0.0", summary: "Increments the integer value of a key by one.", fn: cmdIncr},
		{name: "decr", arity: 2, flags: []string{"write", "denyoom", "fast"}, first: 1, last: 1, step: 1, group: "string", since: "1.0.0", summary: "Decrements the integer value of a key by one.", fn: cmdDecr},
		{name: "incrby", arity: 3, flags: []string{"write", "denyoom", "fast"}, first: 1, last: 1, step: 1, group: "string", since: "1.0.0", summary: "Increments the integer value of a key by a number.", fn: cmdIncrBy},
		{name: "decrby", arity: 3, flags: []string{"write", "denyoom", "fast"}, first: 1, last: 1, step: 1, group: "string", since: "1.0.0", summary: "Decrements a number from the integer value of a key.", fn: cmdDecrBy},
		{name: "getdel", arity: 2, flags: []string{"write", "fast"}, first: 1, last: 1, step: 1, group: "string", since: "6.2.0", summary: "Returns the string value of a key after deleting the key.", fn: cmdGetDel},
		{name: "strlen", arity: 2, flags: []string{"readonly", "fast"}, first: 1, last: 1, step: 1, group: "string", since: "2.2.0", summary: "Returns the length of a string value.", fn: cmdStrlen},
		{name: "getrange", arity: 4, flags: []string{"readonly"}, first: 1, last: 1, step: 1, group: "string", since: "2.4.0", summary: "Returns a substring of the string stored at a key.", fn: cmdGetRange},
		{name: "exists", arity: -2, flags: []string{"readonly", "fast"}, first: 1, last: -1, step: 1, group: "generic", since: "1.0.0", summary: "Determines whether one or more keys exist.", fn: cmdExists},
		{name: "del", arity: -2, flags: []string{"write"}, first: 1, last: -1, step: 1, group: "generic", since: "1.0.0", summary: "Deletes one or more keys.", fn: cmdDel},
		{name: "unlink", arity: -2, flags: []string{"write", "fast"}, first: 1, last: -1, step: 1, group: "generic", since: "4.0.0", summary: "Deletes one or more keys.", fn: cmdDel},
		{name: "type", arity: 2, flags: []string{"readonly", "fast"}, first: 1, last: 1, step: 1, group: "generic", since: "1.0.0", summary: "Determines the type of value stored at a key.", fn: cmdType},
		{name: "ttl", arity: 2, flags: []string{"readonly", "fast"}, first: 1, last: 1, step: 1, group: "generic", since: "1.0.0", summary: "Returns the expiration time in seconds of a key.", fn: cmdTTL},
		{name: "pttl", arity: 2, flags: []string{"readonly", "fast"}, first: 1, last: 1, step: 1, group: "generic", since: "2.6.0", summary: "Returns the expiration time in milliseconds of a key.", fn: cmdPTTL},
		{name: "expire", arity: -3, flags: []string{"write", "fast"}, first: 1, last: 1, step: 1, group: "generic", since: "1.0.0", summary: "Sets the expiration time of a key in seconds.", fn: cmdExpire},
		{name: "pexpire", arity: -3, flags: []string{"write", "fast"}, first: 1, last: 1, step: 1, group: "generic", since: "2.6.0", summary: "Sets the expiration time of a key in milliseconds.", fn: cmdPExpire},
		{name: "expireat", arity: -3, flags: []string{"write", "fast"}, first: 1, last: 1, step: 1, group: "generic", since: "1.2.0", summary: "Sets the expiration time of a key to a Unix timestamp.", fn: cmdExpireAt},
		{name: "pexpireat", arity: -3, flags: []string{"write", "fast"}, first: 1, last: 1, step: 1, group: "generic", since: "2.6.0", summary: "Sets the expiration time of a key to a Unix milliseconds timestamp.", fn: cmdPExpireAt},
		{name: "persist", arity: 2, flags: []string{"write", "fast"}, first: 1, last: 1, step: 1, group: "generic", since: "2.2.0", summary: "Removes the expiration time of a key.", fn: cmdPersist},
		{name: "scan", arity: -2, flags: []string{"readonly"}, group: "generic", since: "2.8.0", summary: "Iterates over the key names in the database.", fn: cmdScan},
		{name: "yuebing.retain", arity: -3, flags: []string{"write", "fast"}, first: 1, last: 1, step: 1, group: "generic", since: "1.0.0", summary: "Changes or releases the retention class of a key's value without rewriting it.", fn: cmdRetain},
		{name: "keys", arity: 2, flags: []string{"readonly"}, group: "generic", since: "1.0.0", summary: "Returns all key names that match a pattern.", fn: cmdKeys},
	}
}
