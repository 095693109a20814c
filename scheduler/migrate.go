package scheduler

import (
	"context"
	"log/slog"

	"github.com/yuebing/yuebing/block"
)

// Migrator copies blocks from one instance to another: the transfer of
// Algorithm 1's line 21, which is also how hot blocks get replicated. The
// replication layer satisfies it; the conductor only calls it.
//
// Migrate is best effort: the prefill that needs the blocks fetches what is
// still missing itself, so an error costs time, never correctness. The
// Driver calls it from one goroutine, with a bounded queue in front.
type Migrator interface {
	Migrate(ctx context.Context, keys []block.Key, from, to string) error
}

// LogMigrator logs each migration and moves nothing: the default until a
// replication layer is wired in, and enough when instances pull the
// prefix themselves on the conductor's plan.
type LogMigrator struct {
	Logger *slog.Logger // nil means slog.Default()
}

var _ Migrator = LogMigrator{}

// Migrate implements Migrator.
func (m LogMigrator) Migrate(ctx context.Context, keys []block.Key, from, to string) error {
	l := m.Logger
	if l == nil {
		l = slog.Default()
	}
	l.DebugContext(ctx, "conductor: migration planned", "from", from, "to", to, "blocks", len(keys))
	return nil
}
