package bench

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RouterSeries reads a router's /metrics: each yuebing_router_* sample
// by its name and labels as written ("name{labels}"), within 10 s.
func RouterSeries(ctx context.Context, hc *http.Client, url string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "yuebing_router_") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}

// StoredEventsSeries names the router's count of engine's stored events.
func StoredEventsSeries(engine string) string {
	return `yuebing_router_events_total{engine="` + engine + `",kind="stored"}`
}
