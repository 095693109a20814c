package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestBenchTransferFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--transport", "udp"}, "--transport"},
		{[]string{"--op", "copy"}, "--op"},
		{[]string{"--threads", "0"}, "--threads"},
		{[]string{"--batch", "-3"}, "--batch"},
		{[]string{"--block-size", "0"}, "--block-size"},
		{[]string{"--paths", "99"}, "--paths"},
		{[]string{"--slice-size", "0"}, "--slice-size"},
		{[]string{"--duration", "-1s"}, "--duration"},
		{[]string{"--duration", "soon"}, "--duration"},
		{[]string{"--threads", "1024", "--batch", "4096"}, "--block-size"},
	} {
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append([]string{"bench", "transfer", "--no-progress"}, tc.args...))
		err := root.Execute()
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%v: error %v, want a usage error naming %s", tc.args, err, tc.flag)
		}
	}
}
