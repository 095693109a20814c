package openai

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestRenderChat(t *testing.T) {
	for _, tc := range []struct {
		msgs string
		want string
		err  bool
	}{
		{`[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"!"}]}]`,
			"<|system|>\nbe brief\n<|user|>\nhi!\n", false},
		{`[{"role":"assistant","content":null}]`, "<|assistant|>\n\n", false},
		{`[]`, "", true},
		{`[{"content":"x"}]`, "", true},
		{`[{"role":"user","content":7}]`, "", true},
	} {
		var msgs []Message
		if err := json.Unmarshal([]byte(tc.msgs), &msgs); err != nil {
			t.Fatal(err)
		}
		got, err := RenderChat(msgs)
		if tc.err {
			if !errors.Is(err, ErrMessages) {
				t.Errorf("%s: got %q, %v; want ErrMessages", tc.msgs, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.msgs, got, err, tc.want)
		}
	}
}
