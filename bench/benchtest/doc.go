// Package benchtest holds what the bench packages' tests share: the
// published Mooncake traces, opened once per test binary, and small traces
// built from block ids.
//
//	tr := benchtest.OpenTestTrace(t, "conversation_trace.jsonl")
//	small := benchtest.MustTrace(t, benchtest.Req(1, 2, 3), benchtest.Req(1, 4))
package benchtest
