package resp

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/yuebing/yuebing/server/auth"
)

// redisVersion is the Redis release whose commands and replies the front
// end follows; clients that check the version see it.
const redisVersion = "7.0.15"

func cmdPing(c *conn, args [][]byte) error {
	switch len(args) {
	case 1:
		c.writeRaw("+PONG\r\n")
	case 2:
		c.writeBulk(args[1])
	default:
		c.writeError("ERR wrong number of arguments for 'ping' command")
	}
	return nil
}

func cmdEcho(c *conn, args [][]byte) error {
	c.writeBulk(args[1])
	return nil
}

func cmdQuit(c *conn, _ [][]byte) error {
	c.writeOK()
	c.quit = true
	return nil
}

func cmdSelect(c *conn, args [][]byte) error {
	n, ok := parseInt(args[1])
	switch {
	case !ok || n < math32Min || n > math32Max:
		c.writeError(errInt)
	case n != 0:
		c.writeError("ERR DB index is out of range")
	default:
		c.writeOK()
	}
	return nil
}

const (
	math32Min = -1 << 31
	math32Max = 1<<31 - 1
)

func cmdAuth(c *conn, args [][]byte) error {
	if len(args) > 3 {
		c.writeError(errSyntax)
		return nil
	}
	user := []byte(nil)
	if len(args) == 3 {
		user = args[1]
	}
	if c.s.opts.Tokens == nil {
		if msg := openAuth(user); msg != "" {
			c.writeError(msg)
			return nil
		}
		c.writeOK()
		return nil
	}
	if msg := c.authenticate(user, args[len(args)-1]); msg != "" {
		c.writeError(msg)
		return nil
	}
	c.writeOK()
	return nil
}

// authenticate checks a token and selects the tenant: the token's own, or
// for an admin token the one named as the user. A user of "default" or the
// token's tenant selects the token's tenant.
func (c *conn) authenticate(user, token []byte) string {
	p, err := c.s.opts.Tokens.AuthenticateFrom(c.peer, string(token))
	if err != nil {
		return c.authFailed(err)
	}
	tenant := p.Tenant
	if u := string(user); user != nil && u != "default" && u != p.Tenant {
		if !p.IsAdmin() {
			c.s.opts.Tokens.Throttle().Fail(c.peer)
			return c.authFailed(auth.ErrForbidden)
		}
		tenant = u
	}
	sp, err := c.s.namespace(tenant)
	if err != nil {
		return "ERR " + err.Error()
	}
	c.principal, c.authed, c.sp = p, true, sp
	c.mu.Lock()
	c.mu.user, c.mu.admin = p.Tenant, p.IsAdmin()
	c.mu.Unlock()
	c.r.lim = c.s.limits(false)
	return ""
}

func cmdHello(c *conn, args [][]byte) error {
	proto := c.proto
	if len(args) > 1 {
		v, ok := parseInt(args[1])
		if !ok {
			c.writeError("ERR Protocol version is not an integer or out of range")
			return nil
		}
		if v != 2 && v != 3 {
			c.writeError("NOPROTO unsupported protocol version")
			return nil
		}
		proto = int(v)
	}
	var user, pass, name []byte
	authGiven := false
	for i := 2; i < len(args); i++ {
		more := len(args) - i - 1
		switch {
		case eq(args[i], "auth") && more >= 2:
			user, pass, authGiven = args[i+1], args[i+2], true
			i += 2
		case eq(args[i], "setname") && more >= 1:
			name = args[i+1]
			i++
		default:
			c.writeError("ERR Syntax error in HELLO option '" + string(trunc(args[i], 128)) + "'")
			return nil
		}
	}
	if authGiven {
		if c.s.opts.Tokens == nil {
			if msg := openAuth(user); msg != "" {
				c.writeError(msg)
				return nil
			}
		} else if msg := c.authenticate(user, pass); msg != "" {
			c.writeError(msg)
			return nil
		}
	}
	if !c.authed {
		c.writeError("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		return nil
	}
	if name != nil {
		if !validClientName(name) {
			c.writeError("ERR Client names cannot contain spaces, newlines or special characters.")
			return nil
		}
		c.mu.Lock()
		c.mu.name = string(name)
		c.mu.Unlock()
	}
	c.proto = proto
	c.mu.Lock()
	c.mu.proto = proto
	c.mu.Unlock()
	c.writeMap(7)
	c.writeBulkString("server")
	c.writeBulkString("redis")
	c.writeBulkString("version")
	c.writeBulkString(redisVersion)
	c.writeBulkString("proto")
	c.writeInt(int64(c.proto))
	c.writeBulkString("id")
	c.writeInt(c.id)
	c.writeBulkString("mode")
	c.writeBulkString("standalone")
	c.writeBulkString("role")
	c.writeBulkString("master")
	c.writeBulkString("modules")
	c.writeArray(0)
	return nil
}

// openAuth answers AUTH on a server without tokens as Redis does with no
// password set: the default user takes any password, so clients that
// always send one (a redis://default:pw@host URL, --user) still connect;
// any other user does not exist; AUTH with a password alone is a
// configuration mistake worth saying.
func openAuth(user []byte) string {
	switch {
	case user == nil:
		return "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
	case string(user) != "default":
		return errWrongPass
	}
	return ""
}

func validClientName(b []byte) bool {
	for _, ch := range b {
		if ch < '!' || ch > '~' {
			return false
		}
	}
	return true
}

func cmdClient(c *conn, args [][]byte) error {
	sub := args[1]
	switch {
	case eq(sub, "id") && len(args) == 2:
		c.writeInt(c.id)
	case eq(sub, "getname") && len(args) == 2:
		c.mu.Lock()
		name := c.mu.name
		c.mu.Unlock()
		if name == "" {
			c.writeNull()
		} else {
			c.writeBulkString(name)
		}
	case eq(sub, "setname") && len(args) == 3:
		if !validClientName(args[2]) {
			c.writeError("ERR Client names cannot contain spaces, newlines or special characters.")
			return nil
		}
		c.mu.Lock()
		c.mu.name = string(args[2])
		c.mu.Unlock()
		c.writeOK()
	case eq(sub, "setinfo") && len(args) == 4:
		if !eq(args[2], "lib-name") && !eq(args[2], "lib-ver") {
			c.writeError("ERR Unrecognized option '" + string(trunc(args[2], 128)) + "'")
			return nil
		}
		if !validClientName(args[3]) {
			c.writeError("ERR " + string(bytes.ToLower(args[2])) + " cannot contain spaces, newlines or special characters.")
			return nil
		}
		c.mu.Lock()
		if eq(args[2], "lib-name") {
			c.mu.libName = string(args[3])
		} else {
			c.mu.libVer = string(args[3])
		}
		c.mu.Unlock()
		c.writeOK()
	case eq(sub, "info") && len(args) == 2:
		c.writeVerbatim(c.clientInfo(time.Now()) + "\n")
	case eq(sub, "list"):
		// CLIENT LIST [TYPE normal] [ID id ...]: every client is a normal one.
		var ids map[int64]bool
		for i := 2; i < len(args); i++ {
			switch {
			case eq(args[i], "type") && i+1 < len(args):
				if t := args[i+1]; !eq(t, "normal") && !eq(t, "master") && !eq(t, "replica") && !eq(t, "slave") && !eq(t, "pubsub") {
					c.writeError("ERR Unknown client type '" + string(trunc(t, 128)) + "'")
					return nil
				} else if !eq(t, "normal") {
					ids = map[int64]bool{} // none of those here
				}
				i++
			case eq(args[i], "id") && i+1 < len(args):
				if ids == nil {
					ids = map[int64]bool{}
				}
				for i++; i < len(args); i++ {
					id, ok := parseInt(args[i])
					if !ok || id <= 0 {
						c.writeError("ERR Invalid client ID")
						return nil
					}
					ids[id] = true
				}
			default:
				c.writeError(errSyntax)
				return nil
			}
		}
		var b strings.Builder
		now := time.Now()
		for _, o := range c.s.clients() {
			if (ids == nil || ids[o.id]) && c.sees(o) {
				b.WriteString(o.clientInfo(now))
				b.WriteByte('\n')
			}
		}
		c.writeVerbatim(b.String())
	case (eq(sub, "no-evict") || eq(sub, "no-touch")) && len(args) == 3:
		if !eq(args[2], "on") && !eq(args[2], "off") {
			c.writeError(errSyntax)
			return nil
		}
		c.writeOK() // nothing here evicts clients or keeps access times
	case eq(sub, "help") && len(args) == 2:
		help := []string{
			"CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"GETNAME", "    Return the name of the current connection.",
			"ID", "    Return the ID of the current connection.",
			"INFO", "    Return information about the current client connection.",
			"LIST [TYPE normal] [ID <id> [<id> ...]]", "    Return information about client connections (with authentication, of the caller's tenant).",
			"NO-EVICT (ON|OFF)", "    Accepted; clients are never evicted here.",
			"NO-TOUCH (ON|OFF)", "    Accepted; keys keep no access time here.",
			"SETINFO <LIB-NAME|LIB-VER> <value>", "    Set client meta attr.",
			"SETNAME <name>", "    Assign the name <name> to the current connection.",
			"HELP", "    Print this help.",
		}
		c.writeArray(len(help))
		for _, h := range help {
			c.writeSimple(h)
		}
	case eq(sub, "id") || eq(sub, "getname") || eq(sub, "setname") || eq(sub, "setinfo") || eq(sub, "info") || eq(sub, "no-evict") || eq(sub, "no-touch") || eq(sub, "help"):
		c.writeError("ERR wrong number of arguments for 'client|" + strings.ToLower(string(sub)) + "' command")
	default:
		c.writeError("ERR unknown subcommand '" + string(trunc(sub, 128)) + "'. Try CLIENT HELP.")
	}
	return nil
}

// sees reports whether c may see o in CLIENT LIST: an admin sees every
// connection; a tenant sees only those authenticated as one of its own,
// since a connection's address, name and last command are its tenant's
// business. Without authentication every client is an admin, as in Redis.
func (c *conn) sees(o *conn) bool {
	if c.principal.IsAdmin() || o == c {
		return true
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return !o.mu.admin && o.mu.user != "" && o.mu.user == c.principal.Tenant
}

// clientInfo is the connection's line of CLIENT INFO and CLIENT LIST, with
// Redis 7's fields (those that mean nothing here at their idle values), so
// clients that parse it into a dict find every key.
func (c *conn) clientInfo(now time.Time) string {
	c.mu.Lock()
	name, libName, libVer, cmd, active, user, proto := c.mu.name, c.mu.libName, c.mu.libVer, c.mu.cmd, c.mu.active, c.mu.user, c.mu.proto
	c.mu.Unlock()
	if cmd == "" {
		cmd = "NULL"
	}
	return fmt.Sprintf("id=%d addr=%s laddr=%s fd=-1 name=%s age=%d idle=%d flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 "+
		"qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=%d rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd=%s user=%s redir=-1 resp=%d lib-name=%s lib-ver=%s",
		c.id, c.nc.RemoteAddr(), c.nc.LocalAddr(), name, int64(now.Sub(c.born).Seconds()), int64(now.Sub(active).Seconds()),
		maxLine, cmd, user, proto, libName, libVer)
}

// cmdCommand answers COMMAND, COMMAND COUNT, LIST, INFO and DOCS from the
// command table: enough for clients that discover commands (redis-cli's
// hints, cluster-aware clients' key positions).
func cmdCommand(c *conn, args [][]byte) error {
	if len(args) == 1 {
		c.writeArray(len(commandList))
		for _, cmd := range commandList {
			c.commandInfo(cmd)
		}
		return nil
	}
	sub := args[1]
	switch {
	case eq(sub, "count") && len(args) == 2:
		c.writeInt(int64(len(commandList)))
	case eq(sub, "list") && len(args) == 2:
		c.writeArray(len(commandList))
		for _, cmd := range commandList {
			c.writeBulkString(cmd.name)
		}
	case eq(sub, "info"):
		c.writeArray(len(args) - 2)
		for _, name := range args[2:] {
			if cmd := lookupCommand(name); cmd != nil {
				c.commandInfo(cmd)
			} else {
				c.writeNullArray()
			}
		}
	case eq(sub, "docs"):
		var cmds []*command
		if len(args) == 2 {
			cmds = commandList
		}
		for _, name := range args[2:] {
			if cmd := lookupCommand(name); cmd != nil {
				cmds = append(cmds, cmd)
			}
		}
		c.writeMap(len(cmds))
		for _, cmd := range cmds {
			c.writeBulkString(cmd.name)
			c.writeMap(4)
			c.writeBulkString("summary")
			c.writeBulkString(cmd.summary)
			c.writeBulkString("since")
			c.writeBulkString(cmd.since)
			c.writeBulkString("group")
			c.writeBulkString(cmd.group)
			c.writeBulkString("arguments")
			c.writeArray(0)
		}
	default:
		c.writeError("ERR unknown subcommand or wrong number of arguments for '" + string(trunc(sub, 128)) + "'. Try COMMAND HELP.")
	}
	return nil
}

// commandInfo writes a command's COMMAND INFO entry in Redis 7's
// ten-element form.
func (c *conn) commandInfo(cmd *command) {
	c.writeArray(10)
	c.writeBulkString(cmd.name)
	c.writeInt(int64(cmd.arity))
	c.writeSet(len(cmd.flags))
	for _, f := range cmd.flags {
		c.writeSimple(f)
	}
	c.writeInt(int64(cmd.first))
	c.writeInt(int64(cmd.last))
	c.writeInt(int64(cmd.step))
	c.writeSet(1)
	c.writeSimple("@" + cmd.group)
	c.writeArray(0) // tips
	c.writeArray(0) // key specs
	c.writeArray(0) // subcommands
}

// cmdConfig answers CONFIG GET with the few parameters clients ask for
// (redis-benchmark reads save and appendonly). The configuration is set at
// start-up; CONFIG SET is refused.
func cmdConfig(c *conn, args [][]byte) error {
	if eq(args[1], "get") && len(args) < 3 {
		c.writeError("ERR wrong number of arguments for 'config|get' command")
		return nil
	}
	if !eq(args[1], "get") {
		c.writeError("ERR CONFIG " + strings.ToUpper(string(trunc(args[1], 32))) + " is not supported: yuebing is configured at start-up")
		return nil
	}
	params := c.s.configParams()
	// A name asked for exactly is answered as it was spelled (CONFIG GET
	// MAXMEMORY answers "MAXMEMORY"), a pattern's matches in lower case:
	// Redis's rule, which clients indexing the reply by their own
	// spelling rely on.
	shown := make(map[string]string, len(params))
	for _, p := range args[2:] {
		lp := lower(p)
		if _, ok := params[string(lp)]; ok && !bytes.ContainsAny(p, "*?[") {
			if _, dup := shown[string(lp)]; !dup {
				shown[string(lp)] = string(p)
			}
			continue
		}
		for name := range params {
			if _, dup := shown[name]; !dup && match(lp, []byte(name)) {
				shown[name] = name
			}
		}
	}
	names := make([]string, 0, len(shown))
	for name := range shown {
		names = append(names, name)
	}
	sort.Strings(names)
	c.writeMap(len(names))
	for _, n := range names {
		c.writeBulkString(shown[n])
		c.writeBulkString(params[n])
	}
	return nil
}

func lower(b []byte) []byte { return []byte(strings.ToLower(string(b))) }

func (s *Server) configParams() map[string]string {
	st := s.store.Stats()
	top := int64(0)
	if len(st.Tiers) > 0 {
		top = st.Tiers[0].Capacity
	}
	return map[string]string{
		"save":               "",
		"appendonly":         "no",
		"databases":          "1",
		"maxmemory":          strconv.FormatInt(top, 10),
		"maxmemory-policy":   "allkeys-lru",
		"maxclients":         strconv.Itoa(s.opts.MaxConns),
		"proto-max-bulk-len": strconv.FormatInt(s.opts.MaxBulkLen, 10),
		"timeout":            "0",
	}
}

// cmdInfo reports real figures: the store's tiers and the server's own
// counters, under Redis's section and field names where one exists.
func cmdInfo(c *conn, args [][]byte) error {
	want := map[string]bool{}
	all := len(args) == 1
	for _, a := range args[1:] {
		s := strings.ToLower(string(a))
		if s == "all" || s == "everything" || s == "default" {
			all = true
		}
		want[s] = true
	}
	var b strings.Builder
	section := func(name string, lines func()) {
		if !all && !want[strings.ToLower(name)] {
			return
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString("# " + name + "\r\n")
		lines()
	}
	kv := func(k string, v any) { fmt.Fprintf(&b, "%s:%v\r\n", k, v) }
	s := c.s
	st := s.Stats()
	hs := s.store.Stats()
	section("Server", func() {
		kv("redis_version", redisVersion)
		kv("yuebing_version", s.opts.Version)
		kv("redis_mode", "standalone")
		kv("os", runtime.GOOS+" "+runtime.GOARCH)
		kv("arch_bits", strconv.IntSize)
		kv("go_version", runtime.Version())
		kv("process_id", os.Getpid())
		if a, ok := c.nc.LocalAddr().(*net.TCPAddr); ok {
			kv("tcp_port", a.Port)
		}
		kv("uptime_in_seconds", st.UptimeSeconds)
		kv("uptime_in_days", st.UptimeSeconds/86400)
	})
	section("Clients", func() {
		kv("connected_clients", st.ConnectedClients)
		kv("maxclients", s.opts.MaxConns)
		kv("blocked_clients", 0)
	})
	section("Memory", func() {
		var used, capacity int64
		if len(hs.Tiers) > 0 {
			used, capacity = hs.Tiers[0].Used, hs.Tiers[0].Capacity
		}
		if s.share.r != nil {
			// The top tier's used bytes count the inline values'
			// reservation; what they use of it is the figure.
			used += st.InlineBytes - st.InlineReserved
		} else {
			// Inline values are DRAM too, beside the top tier.
			used, capacity = used+st.InlineBytes, capacity+st.InlineCapacity
		}
		kv("used_memory", used)
		kv("used_memory_human", human(used))
		kv("maxmemory", capacity)
		kv("maxmemory_human", human(capacity))
		kv("maxmemory_policy", "allkeys-lru")
		var su, sc int64
		for _, t := range hs.Tiers {
			su += t.Used
			sc += t.Capacity
		}
		if u := s.opts.Budget; u != nil {
			b, us := u.Budget(), u.Stats()
			kv("inflight_bytes", b.InUse())
			kv("inflight_capacity_bytes", b.Capacity())
			kv("inflight_resp_bytes", us.InUse)
			kv("inflight_waits", us.Waits)
			kv("inflight_rejections", us.Rejections)
		}
		kv("store_used_bytes", su)
		kv("store_capacity_bytes", sc)
		kv("store_blocks", hs.Blocks)
		kv("store_index_bytes", hs.IndexBytes)
		for _, t := range hs.Tiers {
			p := "tier_" + t.Name + "_"
			kv(p+"used_bytes", t.Used)
			kv(p+"capacity_bytes", t.Capacity)
			kv(p+"blocks", t.Blocks)
			kv(p+"pinned_bytes", t.Pinned)
			kv(p+"evictions", t.Evictions)
			kv(p+"demotions", t.Demotions)
			kv(p+"promotions", t.Promotions)
		}
		kv("key_table_keys", st.Keys)
		kv("inline_keys", st.InlineKeys)
		kv("inline_used_bytes", st.InlineBytes)
		kv("inline_capacity_bytes", st.InlineCapacity)
		kv("inline_reserved_bytes", st.InlineReserved)
		kv("inline_corrupt_values", st.CorruptValues)
		kv("expiry_heap_entries", st.ExpiryHeapEntries)
	})
	section("Persistence", func() {
		kv("loading", 0)
		kv("rdb_changes_since_last_save", 0)
		kv("aof_enabled", 0)
	})
	section("Stats", func() {
		kv("total_connections_received", st.TotalConnections)
		kv("total_commands_processed", st.Commands)
		kv("total_net_input_bytes", st.NetInputBytes)
		kv("total_net_output_bytes", st.NetOutputBytes)
		kv("rejected_connections", st.RejectedConns)
		kv("expired_keys", st.ExpiredKeys)
		kv("evicted_keys", st.EvictedKeys)
		kv("keyspace_hits", st.KeyspaceHits)
		kv("keyspace_misses", st.KeyspaceMisses)
		kv("keyspace_remote_hits", st.RemoteHits)
		kv("keyspace_inline_hits", st.InlineHits)
		kv("total_error_replies", st.ErrorReplies)
		kv("acl_access_denied_auth", st.AuthFailures)
		kv("store_hits", hs.Hits)
		kv("store_misses", hs.Misses)
		kv("store_dropped_demotions", hs.DroppedDemotions)
	})
	section("Replication", func() {
		kv("role", "master")
		kv("connected_slaves", 0)
	})
	section("CPU", func() {
		var ru syscall.Rusage
		if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
			kv("used_cpu_sys", fmt.Sprintf("%.6f", float64(ru.Stime.Nano())/1e9))
			kv("used_cpu_user", fmt.Sprintf("%.6f", float64(ru.Utime.Nano())/1e9))
		}
	})
	section("Cluster", func() {
		// Not Redis Cluster's protocol: nodes of a yuebing cluster share
		// one keyspace behind the plain protocol (docs/resp.md).
		kv("cluster_enabled", 0)
	})
	section("Keyspace", func() {
		if n := c.sp.keys.Load(); n > 0 {
			fmt.Fprintf(&b, "db0:keys=%d,expires=%d,avg_ttl=0\r\n", n, max(c.sp.expires.Load(), 0))
		}
	})
	c.writeVerbatim(b.String())
	return nil
}

func human(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + "B"
	}
	f, i := float64(n), 0
	for f >= unit && i < 4 {
		f /= unit
		i++
	}
	return strconv.FormatFloat(f, 'f', 2, 64) + string("BKMGT"[i])
}
