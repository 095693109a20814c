package resp

import (
	"strings"
	"testing"
)

// exactSteps is a session whose every reply must match byte for byte:
// LMCache's native connector and many clients compare "+OK\r\n", ":1\r\n"
// and "$<len>\r\n" literally. Steps marked same are also checked against
// Debian's redis-server when it is installed, which keeps the expected
// bytes honest: they are Redis's, not this package's idea of them.
var exactSteps = []struct {
	args []string
	want string
	same bool // redis-server replies the same
}{
	{[]string{"PING"}, "+PONG\r\n", true},
	{[]string{"ping", "hello"}, "$5\r\nhello\r\n", true},
	{[]string{"ECHO", ""}, "$0\r\n\r\n", true},
	{[]string{"SELECT", "0"}, "+OK\r\n", true},
	{[]string{"SELECT", "1"}, "-ERR DB index is out of range\r\n", false}, // redis-server has 16
	{[]string{"SELECT", "x"}, "-ERR value is not an integer or out of range\r\n", true},
	{[]string{"GET", "k"}, "$-1\r\n", true},
	{[]string{"SET", "k", "v"}, "+OK\r\n", true},
	{[]string{"GET", "k"}, "$1\r\nv\r\n", true},
	{[]string{"SET", "k", "v2", "NX"}, "$-1\r\n", true},
	{[]string{"SET", "k", "v2", "XX", "GET"}, "$1\r\nv\r\n", true},
	{[]string{"GET", "k"}, "$2\r\nv2\r\n", true},
	{[]string{"SET", "nokey", "v", "XX"}, "$-1\r\n", true},
	{[]string{"SET", "k", "v3", "EX", "0"}, "-ERR invalid expire time in 'set' command\r\n", true},
	{[]string{"SET", "k", "v3", "EX", "x"}, "-ERR value is not an integer or out of range\r\n", true},
	{[]string{"SET", "k", "v3", "EX", "10", "PX", "10"}, "-ERR syntax error\r\n", true},
	{[]string{"SET", "k", "v3", "NX", "XX"}, "-ERR syntax error\r\n", true},
	{[]string{"SET", "k", "v3", "FOO"}, "-ERR syntax error\r\n", true},
	{[]string{"SET", "k", "v3", "EX"}, "-ERR syntax error\r\n", true},
	{[]string{"SET", "k"}, "-ERR wrong number of arguments for 'set' command\r\n", true},
	{[]string{"GET"}, "-ERR wrong number of arguments for 'get' command\r\n", true},
	{[]string{"GET", "k"}, "$2\r\nv2\r\n", true},
	{[]string{"STRLEN", "k"}, ":2\r\n", true},
	{[]string{"STRLEN", "nokey"}, ":0\r\n", true},
	{[]string{"EXISTS", "k", "k", "nokey"}, ":2\r\n", true},
	{[]string{"TYPE", "k"}, "+string\r\n", true},
	{[]string{"TYPE", "nokey"}, "+none\r\n", true},
	{[]string{"TTL", "k"}, ":-1\r\n", true},
	{[]string{"PTTL", "nokey"}, ":-2\r\n", true},
	{[]string{"EXPIRE", "k", "100"}, ":1\r\n", true},
	{[]string{"TTL", "k"}, ":100\r\n", true},
	{[]string{"EXPIRE", "k", "100", "NX"}, ":0\r\n", true},
	{[]string{"EXPIRE", "k", "200", "GT"}, ":1\r\n", true},
	{[]string{"TTL", "k"}, ":200\r\n", true},
	{[]string{"EXPIRE", "k", "50", "LT"}, ":1\r\n", true},
	{[]string{"TTL", "k"}, ":50\r\n", true},
	{[]string{"EXPIRE", "k", "10", "NX", "XX"}, "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n", true},
	{[]string{"EXPIRE", "k", "10", "GT", "LT"}, "-ERR GT and LT options at the same time are not compatible\r\n", true},
	{[]string{"EXPIRE", "k", "ten"}, "-ERR value is not an integer or out of range\r\n", true},
	{[]string{"EXPIRE", "nokey", "10"}, ":0\r\n", true},
	{[]string{"PEXPIRE", "k", "100000"}, ":1\r\n", true},
	{[]string{"TTL", "k"}, ":100\r\n", true},
	{[]string{"PERSIST", "k"}, ":1\r\n", true},
	{[]string{"PERSIST", "k"}, ":0\r\n", true},
	{[]string{"TTL", "k"}, ":-1\r\n", true},
	{[]string{"SET", "k2", "hello", "EX", "100"}, "+OK\r\n", true},
	{[]string{"SET", "k2", "world", "KEEPTTL"}, "+OK\r\n", true},
	{[]string{"TTL", "k2"}, ":100\r\n", true},
	{[]string{"SET", "k2", "world"}, "+OK\r\n", true},
	{[]string{"TTL", "k2"}, ":-1\r\n", true},
	{[]string{"EXPIRE", "k2", "-1"}, ":1\r\n", true},
	{[]string{"EXISTS", "k2"}, ":0\r\n", true},
	{[]string{"SET", "s", "This is a string"}, "+OK\r\n", true},
	{[]string{"GETRANGE", "s", "0", "3"}, "$4\r\nThis\r\n", true},
	{[]string{"GETRANGE", "s", "-3", "-1"}, "$3\r\ning\r\n", true},
	{[]string{"GETRANGE", "s", "0", "-1"}, "$16\r\nThis is a string\r\n", true},
	{[]string{"GETRANGE", "s", "10", "100"}, "$6\r\nstring\r\n", true},
	{[]string{"GETRANGE", "s", "5", "3"}, "$0\r\n\r\n", true},
	{[]string{"GETRANGE", "s", "-1", "-5"}, "$0\r\n\r\n", true},
	{[]string{"GETRANGE", "s", "-100", "2"}, "$3\r\nThi\r\n", true},
	{[]string{"GETRANGE", "nokey", "0", "-1"}, "$0\r\n\r\n", true},
	{[]string{"GETRANGE", "s", "a", "1"}, "-ERR value is not an integer or out of range\r\n", true},
	{[]string{"DEL", "k", "s", "nokey"}, ":2\r\n", true},
	{[]string{"UNLINK", "k"}, ":0\r\n", true},
	{[]string{"MSET", "a", "1", "b", "2"}, "+OK\r\n", true},
	{[]string{"MGET", "a", "b", "c"}, "*3\r\n$1\r\n1\r\n$1\r\n2\r\n$-1\r\n", true},
	{[]string{"MSET", "a"}, "-ERR wrong number of arguments for 'mset' command\r\n", true},
	{[]string{"MSET", "a", "1", "b"}, "-ERR wrong number of arguments for 'mset' command\r\n", true},
	{[]string{"DBSIZE"}, ":2\r\n", true},
	{[]string{"KEYS", "a"}, "*1\r\n$1\r\na\r\n", true},
	{[]string{"KEYS", "[a]*"}, "*1\r\n$1\r\na\r\n", true},
	{[]string{"KEYS", "z*"}, "*0\r\n", true},
	{[]string{"SCAN", "0", "MATCH", "b", "COUNT", "1000"}, "*2\r\n$1\r\n0\r\n*1\r\n$1\r\nb\r\n", true},
	{[]string{"SCAN", "x"}, "-ERR invalid cursor\r\n", true},
	{[]string{"SCAN", "0", "COUNT", "0"}, "-ERR syntax error\r\n", true},
	{[]string{"SCAN", "0", "TYPE", "list"}, "*2\r\n$1\r\n0\r\n*0\r\n", true},
	{[]string{"FOO", "bar", "baz"}, "-ERR unknown command 'FOO', with args beginning with: 'bar' 'baz' \r\n", true},
	{[]string{"foo"}, "-ERR unknown command 'foo', with args beginning with: \r\n", true},
	{[]string{"CLIENT", "SETNAME", "lmcache"}, "+OK\r\n", true},
	{[]string{"CLIENT", "GETNAME"}, "$7\r\nlmcache\r\n", true},
	{[]string{"CLIENT", "SETNAME", "a b"}, "-ERR Client names cannot contain spaces, newlines or special characters.\r\n", true},
	{[]string{"CLIENT", "SETINFO", "lib-name", "redis-py"}, "+OK\r\n", false}, // Redis 7.2
	{[]string{"AUTH", "secret"}, "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n", true},
	// Without passwords the default user takes any (redis://default:pw@
	// URLs, redis-cli --user); other users do not exist.
	{[]string{"AUTH", "default", "secret"}, "+OK\r\n", true},
	{[]string{"AUTH", "bob", "secret"}, "-WRONGPASS invalid username-password pair or user is disabled.\r\n", true},
	{[]string{"CLIENT", "FOO"}, "-ERR unknown subcommand 'FOO'. Try CLIENT HELP.\r\n", true},
	{[]string{"CLIENT", "SETNAME"}, "-ERR wrong number of arguments for 'client|setname' command\r\n", true},
	{[]string{"CLIENT", "NO-EVICT", "on"}, "+OK\r\n", true},
	{[]string{"CLIENT", "LIST", "TYPE", "pubsub"}, "$0\r\n\r\n", true},
	{[]string{"HELLO", "4"}, "-NOPROTO unsupported protocol version\r\n", true},
	{[]string{"FLUSHDB"}, "+OK\r\n", true},
	{[]string{"DBSIZE"}, ":0\r\n", true},
	{[]string{"MGET", "a"}, "*1\r\n$-1\r\n", true},
	{[]string{"COMMAND", "INFO", "get"}, "*1\r\n*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n*1\r\n+@string\r\n*0\r\n*0\r\n*0\r\n", false},
	{[]string{"CONFIG", "GET", "appendonly"}, "*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n", true},
	{[]string{"CONFIG", "GET", "APPENDONLY"}, "*2\r\n$10\r\nAPPENDONLY\r\n$2\r\nno\r\n", true},
	{[]string{"INFO", "cluster"}, "$30\r\n# Cluster\r\ncluster_enabled:0\r\n\r\n", true},
	{[]string{"CONFIG", "GET"}, "-ERR wrong number of arguments for 'config|get' command\r\n", true},
	// Counters.
	{[]string{"SET", "i", "10"}, "+OK\r\n", true},
	{[]string{"INCR", "i"}, ":11\r\n", true},
	{[]string{"INCRBY", "i", "5"}, ":16\r\n", true},
	{[]string{"DECR", "i"}, ":15\r\n", true},
	{[]string{"DECRBY", "i", "20"}, ":-5\r\n", true},
	{[]string{"INCR", "new"}, ":1\r\n", true},
	{[]string{"SET", "s", "abc"}, "+OK\r\n", true},
	{[]string{"INCR", "s"}, "-ERR value is not an integer or out of range\r\n", true},
	{[]string{"SET", "top", "9223372036854775807"}, "+OK\r\n", true},
	{[]string{"INCR", "top"}, "-ERR increment or decrement would overflow\r\n", true},
	{[]string{"INCRBY", "i", "x"}, "-ERR value is not an integer or out of range\r\n", true},
	{[]string{"GET", "i"}, "$2\r\n-5\r\n", true},
	{[]string{"DEL", "i", "new", "s", "top"}, ":4\r\n", true},
	// SET's relatives.
	{[]string{"SETEX", "s", "100", "v"}, "+OK\r\n", true},
	{[]string{"SETEX", "s", "0", "v"}, "-ERR invalid expire time in 'setex' command\r\n", true},
	{[]string{"SETEX", "s", "x", "v"}, "-ERR value is not an integer or out of range\r\n", true},
	{[]string{"PSETEX", "p", "100000", "v"}, "+OK\r\n", true},
	{[]string{"SETNX", "s", "w"}, ":0\r\n", true},
	{[]string{"SETNX", "n", "w"}, ":1\r\n", true},
	{[]string{"GETSET", "n", "z"}, "$1\r\nw\r\n", true},
	{[]string{"GETSET", "m", "z"}, "$-1\r\n", true},
	{[]string{"GETDEL", "n"}, "$1\r\nz\r\n", true},
	{[]string{"GETDEL", "n"}, "$-1\r\n", true},
	{[]string{"EXPIREAT", "s", "1"}, ":1\r\n", true},
	{[]string{"EXISTS", "s"}, ":0\r\n", true},
	{[]string{"PEXPIREAT", "p", "99999999999999"}, ":1\r\n", true},
	{[]string{"PEXPIREAT", "nothing", "1"}, ":0\r\n", true},
	{[]string{"DEL", "p", "m"}, ":2\r\n", true},
	// Transactions: queued, then run in order; an error while queueing
	// runs nothing.
	{[]string{"MULTI"}, "+OK\r\n", true},
	{[]string{"SET", "t", "1"}, "+QUEUED\r\n", true},
	{[]string{"GET", "t"}, "+QUEUED\r\n", true},
	{[]string{"EXEC"}, "*2\r\n+OK\r\n$1\r\n1\r\n", true},
	{[]string{"MULTI"}, "+OK\r\n", true},
	{[]string{"SET", "t", "2"}, "+QUEUED\r\n", true},
	{[]string{"GET"}, "-ERR wrong number of arguments for 'get' command\r\n", true},
	{[]string{"EXEC"}, "-EXECABORT Transaction discarded because of previous errors.\r\n", true},
	{[]string{"GET", "t"}, "$1\r\n1\r\n", true},
	{[]string{"EXEC"}, "-ERR EXEC without MULTI\r\n", true},
	{[]string{"DISCARD"}, "-ERR DISCARD without MULTI\r\n", true},
	{[]string{"MULTI"}, "+OK\r\n", true},
	{[]string{"MULTI"}, "-ERR MULTI calls can not be nested\r\n", true},
	{[]string{"DEL", "t"}, "+QUEUED\r\n", true},
	{[]string{"DISCARD"}, "+OK\r\n", true},
	{[]string{"MULTI"}, "+OK\r\n", true},
	{[]string{"EXEC"}, "*0\r\n", true},
	{[]string{"DEL", "t"}, ":1\r\n", true},
	// WATCH: a watched key written before EXEC fails the transaction.
	{[]string{"WATCH", "w"}, "+OK\r\n", true},
	{[]string{"SET", "w", "1"}, "+OK\r\n", true},
	{[]string{"MULTI"}, "+OK\r\n", true},
	{[]string{"WATCH", "w"}, "-ERR WATCH inside MULTI is not allowed\r\n", true},
	{[]string{"SET", "w", "2"}, "+QUEUED\r\n", true},
	{[]string{"EXEC"}, "*-1\r\n", true},
	{[]string{"GET", "w"}, "$1\r\n1\r\n", true},
	{[]string{"WATCH", "w", "absent"}, "+OK\r\n", true},
	{[]string{"MULTI"}, "+OK\r\n", true},
	{[]string{"SET", "w", "3"}, "+QUEUED\r\n", true},
	{[]string{"EXEC"}, "*1\r\n+OK\r\n", true},
	{[]string{"WATCH", "w"}, "+OK\r\n", true},
	{[]string{"EXPIRE", "w", "100"}, ":1\r\n", true},
	{[]string{"UNWATCH"}, "+OK\r\n", true},
	{[]string{"MULTI"}, "+OK\r\n", true},
	{[]string{"DEL", "w"}, "+QUEUED\r\n", true},
	{[]string{"EXEC"}, "*1\r\n:1\r\n", true},
	{[]string{"RESET"}, "+RESET\r\n", true},
	{[]string{"QUIT"}, "+OK\r\n", true},
}

func runExact(t *testing.T, addr string, onlySame bool) {
	c := dial(t, addr)
	for i, st := range exactSteps {
		if onlySame && !st.same {
			continue
		}
		if got := c.do(st.args...); got != st.want {
			t.Errorf("step %d %q:\n got %q\nwant %q", i, st.args, got, st.want)
		}
	}
	if !c.closed() {
		t.Error("QUIT did not close the connection")
	}
}

func TestExactReplies(t *testing.T) {
	s := startServer(t, Options{})
	runExact(t, s.addr, false)
}

// TestExactRepliesMatchRedis checks the expected bytes against the real
// redis-server.
func TestExactRepliesMatchRedis(t *testing.T) {
	addr := redisServer(t)
	c := dial(t, addr)
	if got := c.do("FLUSHALL"); got != "+OK\r\n" {
		t.Fatalf("FLUSHALL: %q", got)
	}
	runExact(t, addr, true)
}

// TestPipelinedExact sends the whole session in one write: replies come
// back in order and byte for byte.
func TestPipelinedExact(t *testing.T) {
	s := startServer(t, Options{})
	c := dial(t, s.addr)
	var req, want strings.Builder
	for _, st := range exactSteps {
		req.WriteString(multibulk(st.args...))
		want.WriteString(st.want)
	}
	c.send(req.String())
	var got strings.Builder
	for range exactSteps {
		got.WriteString(c.reply())
	}
	if got.String() != want.String() {
		t.Errorf("pipelined replies differ:\n got %q\nwant %q", got.String(), want.String())
	}
}
