package main

import (
	"fmt"
	"strings"

	"github.com/yuebing/yuebing/router"
)

// engineFlag is a repeatable --engine: id=e0,url=http://host:8000 and
// optionally events=tcp://host:5557,replay=tcp://host:5558,role=both,node=http://host:8080.
type engineFlag struct{ engines *[]router.Engine }

func (f engineFlag) String() string { return "" }
func (f engineFlag) Type() string   { return "engine" }

func (f engineFlag) Set(s string) error {
	var e router.Engine
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("%q: want key=value pairs separated by commas", kv)
		}
		switch k {
		case "id":
			e.ID = v
		case "url":
			e.URL = v
		case "events":
			e.Events = v
		case "replay":
			e.Replay = v
		case "role":
			e.Role = v
		case "node":
			e.Node = v
		default:
			return fmt.Errorf("unknown key %q: want id, url, events, replay, role or node", k)
		}
	}
	if e.ID == "" || e.URL == "" {
		return fmt.Errorf("%q: id and url are required", s)
	}
	*f.engines = append(*f.engines, e)
	return nil
}
