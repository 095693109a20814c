package bench

import "os"

func tempDir() (string, error) { return os.MkdirTemp("", "yuebing-bench-") }

func removeAll(dir string) { os.RemoveAll(dir) }
