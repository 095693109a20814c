package scheduler

import (
	"bytes"
	_ "embed"
	"sync"
)

// defaultProfile is WritePaperProfile's output for DefaultMFU; a test keeps
// the two in step.
//
//go:embed profiles/llama3-70b-8xa800.csv
var defaultProfile []byte

var defaultPrefill = sync.OnceValue(func() *PrefillModel {
	m, err := ParsePrefillProfile(bytes.NewReader(defaultProfile))
	if err != nil {
		panic("BUG: scheduler: default profile: " + err.Error())
	}
	return m
})

// DefaultPrefillModel returns the model fitted to the default profile:
// LLaMA3-70B on 8 x A800 at DefaultMFU.
func DefaultPrefillModel() *PrefillModel { return defaultPrefill() }

// DefaultProfile returns the default prefill profile CSV. The caller may
// modify the returned slice.
func DefaultProfile() []byte { return bytes.Clone(defaultProfile) }
