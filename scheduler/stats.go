package scheduler

// Decisions counts the scheduling decisions a driver made.
type Decisions struct {
	Accepted int64 `json:"accepted"`
	// Rejected counts refusals by reason; every reason is present.
	Rejected map[Reason]int64 `json:"rejected"`
}

func (d *Driver) count(dec Decision) {
	switch dec.Rejected {
	case "":
		d.accepted.Add(1)
	case ReasonTTFT:
		d.rejectedTTFT.Add(1)
	case ReasonTBT:
		d.rejectedTBT.Add(1)
	default:
		panic("BUG: scheduler: decision with unknown rejection reason " + string(dec.Rejected))
	}
}

// Decisions returns the decisions made so far.
func (d *Driver) Decisions() Decisions {
	return Decisions{
		Accepted: d.accepted.Load(),
		Rejected: map[Reason]int64{ReasonTTFT: d.rejectedTTFT.Load(), ReasonTBT: d.rejectedTBT.Load()},
	}
}

// Stats is a summary of the conductor for operators.
type Stats struct {
	Decisions Decisions `json:"decisions"`
	// Migrations counts pull plans queued for the migrator, dropped
	// because its queue was full, and failed.
	Migrations struct {
		Queued  int64 `json:"queued"`
		Dropped int64 `json:"dropped"`
		Failed  int64 `json:"failed"`
	} `json:"migrations"`
	// Instances is how many instances are registered, by role.
	Instances map[Role]int `json:"instances"`
	// TTFTSLO and TBTSLO are the SLOs decisions are held to, in seconds.
	TTFTSLO float64 `json:"ttft_slo_seconds"`
	TBTSLO  float64 `json:"tbt_slo_seconds"`
}

// Stats returns the conductor's summary.
func (d *Driver) Stats() Stats {
	var st Stats
	st.Decisions = d.Decisions()
	st.Migrations.Queued, st.Migrations.Dropped, st.Migrations.Failed = d.MigrationStats()
	st.Instances = map[Role]int{}
	for _, in := range d.Instances() {
		st.Instances[in.Role]++
	}
	st.TTFTSLO, st.TBTSLO = d.opts.Core.TTFTSLO.Seconds(), d.opts.Core.TBTSLO.Seconds()
	return st
}
