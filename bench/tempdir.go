package bench

import "os"

func TempDir() (string, error) { return os.MkdirTemp("", "yuebing-bench-") }

func RemoveAll(dir string) { os.RemoveAll(dir) }
