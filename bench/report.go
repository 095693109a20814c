package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"
)

// Row is one measured case: a flat object with a "name" and its figures.
// Values should be strings, bools, integers or floats.
type Row map[string]any

// Report collects rows and prints them.
type Report struct {
	Results []Row `json:"results"`
	// Columns orders the fields; fields not listed follow in sorted order.
	Columns []string `json:"-"`
	// Human picks the few columns of the human table that answer the
	// bench's question, after name, by the longest key that starts a row's
	// name ("" for the others); rows of one key make one table. Without an
	// entry the table shows Columns, as many as fit.
	Human map[string][]string `json:"-"`
}

// Add appends a row.
func (r *Report) Add(row Row) { r.Results = append(r.Results, row) }

// WriteJSON writes the report as exactly one JSON object and a newline.
func (r *Report) WriteJSON(w io.Writer) error {
	if r.Results == nil {
		r.Results = []Row{}
	}
	for _, row := range r.Results {
		for k, v := range row {
			if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
				row[k] = nil // JSON has no NaN; null says "not measured"
			}
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("bench: encoding report: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// TableWidth is the most columns a human table takes: what does not fit is
// left to --json.
const TableWidth = 100

// nameWidth caps the name column; a longer name is cut in the middle.
const nameWidth = 40

// WriteTable writes the report as aligned text tables for a person: rows are
// grouped by the Human entry of their name (in order of first appearance),
// each group a table of name and the group's Human columns, cells formatted
// for reading (percentages, ratios, sizes), columns no row has left out and
// the table held to TableWidth. Every field stays in WriteJSON.
func (r *Report) WriteTable(w io.Writer) error {
	type group struct {
		key  string
		rows []Row
	}
	var groups []*group
	byKey := map[string]*group{}
	for _, row := range r.Results {
		name, _ := row["name"].(string)
		key := r.humanKey(name)
		g := byKey[key]
		if g == nil {
			g = &group{key: key}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.rows = append(g.rows, row)
	}
	if len(groups) == 0 {
		groups = []*group{{}}
	}
	for i, g := range groups {
		if i > 0 {
			if _, err := fmt.Fprintln(w); err != nil {
				return err
			}
		}
		if err := r.writeTable(w, r.tableColumns(g.key, g.rows), g.rows); err != nil {
			return err
		}
	}
	return nil
}

// humanKey is the longest key of Human that starts name, "" if none.
func (r *Report) humanKey(name string) string {
	key := ""
	for k := range r.Human {
		if len(k) > len(key) && strings.HasPrefix(name, k) {
			key = k
		}
	}
	return key
}

// tableColumns is name, then the group's Human columns (or, without one, the
// report's columns) that some row of the group has.
func (r *Report) tableColumns(key string, rows []Row) []string {
	want := r.Human[key]
	if want == nil {
		want = r.columns()
	}
	cols := []string{"name"}
	for _, c := range want {
		if c == "name" {
			continue
		}
		for _, row := range rows {
			if v, ok := row[c]; ok && v != nil {
				cols = append(cols, c)
				break
			}
		}
	}
	return cols
}

func (r *Report) writeTable(w io.Writer, cols []string, rows []Row) error {
	cells := make([][]string, len(rows)+1)
	cells[0] = make([]string, len(cols))
	for i, c := range cols {
		cells[0][i] = Header(c)
	}
	for j, row := range rows {
		cells[j+1] = make([]string, len(cols))
		for i, c := range cols {
			s := FormatCell(c, row[c])
			if i == 0 {
				s = shorten(s, nameWidth)
			}
			cells[j+1][i] = s
		}
	}
	// Keep the leading columns that fit: the first ones answer the question.
	const gap = 2
	width, n := 0, 0
	for i := range cols {
		cw := 0
		for _, line := range cells {
			cw = max(cw, utf8.RuneCountInString(line[i]))
		}
		add := cw
		if i > 0 {
			add += gap
		}
		if i > 0 && width+add > TableWidth {
			break
		}
		width += add
		n++
	}
	// Text columns (name first) are left-aligned, figures right-aligned:
	// padding a text cell to its column's width makes tabwriter's
	// right-alignment a no-op.
	for i := range n {
		if i > 0 && !isText(cells[1:], i) {
			continue
		}
		cw := 0
		for _, line := range cells {
			cw = max(cw, utf8.RuneCountInString(line[i]))
		}
		for _, line := range cells {
			line[i] += strings.Repeat(" ", cw-utf8.RuneCountInString(line[i]))
		}
	}
	// A last text column ends its lines unterminated, so no padding trails.
	end := "\t"
	if n == 1 || isText(cells[1:], n-1) {
		end = ""
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, gap, ' ', tabwriter.AlignRight)
	for _, line := range cells {
		s := strings.Join(line[:n], "\t")
		if end == "" {
			// The unterminated text is no cell: it gets its gap here.
			if n > 1 {
				s = strings.Join(line[:n-1], "\t") + "\t" + strings.Repeat(" ", gap) + line[n-1]
			}
			s = strings.TrimRight(s, " ")
		}
		fmt.Fprintln(tw, s+end)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Right-aligned, every cell has its gap on the left: the first one's is
	// not needed.
	for line := range strings.Lines(buf.String()) {
		if _, err := io.WriteString(w, strings.TrimPrefix(line, strings.Repeat(" ", gap))); err != nil {
			return err
		}
	}
	return nil
}

// isText reports whether column i holds words rather than figures.
func isText(rows [][]string, i int) bool {
	for _, line := range rows {
		c := line[i]
		if c == "" || c == "-" {
			continue
		}
		if (c[0] < '0' || c[0] > '9') && c[0] != '-' && c[0] != '+' && c[0] != '.' {
			return true
		}
	}
	return false
}

// shorten cuts s to n runes, keeping its start and end around an ellipsis.
func shorten(s string, n int) string {
	rs := []rune(s)
	if len(rs) <= n {
		return s
	}
	head := (n - 1) / 2
	return string(rs[:head]) + "…" + string(rs[len(rs)-(n-1-head):])
}

// headerWords shortens the words of a field name in a table header.
var headerWords = strings.NewReplacer(
	"effective_capacity", "eff_cap", "busiest_engine_frac", "busiest",
	"baseline", "base", "_tokens", "_tok", "_bytes", "", "requests", "reqs",
	"_per_sec", "/s", "_per_s", "/s", "concurrency", "conc", "goroutines", "workers", "bytes_per_entry", "B/entry",
	"capacity", "cap", "compute_saved", "saved", "_frac", "",
)

// Header is a field's name as a table header: shorter, spaces for
// underscores.
func Header(field string) string {
	if field == "name" {
		return field
	}
	return headerWords.Replace(field)
}

// FormatCell formats a field's value for a person: fractions (hit rates,
// shares) as percentages, ratios with an x, byte counts in binary units,
// large counts with k or M.
func FormatCell(field string, v any) string {
	f, isNum := toFloat(v)
	if !isNum {
		return formatCell(v)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "-"
	}
	switch {
	case field == "ratio" || strings.HasSuffix(field, "_ratio") || strings.HasSuffix(field, "_vs_baseline"):
		return strconv.FormatFloat(f, 'f', 2, 64) + "x"
	case strings.HasSuffix(field, "hit_rate") || strings.HasSuffix(field, "_frac") || strings.HasSuffix(field, "_share") ||
		field == "compute_saved" || field == "effective_capacity" || field == "gap_closed" || field == "of_unbounded":
		return strconv.FormatFloat(100*f, 'f', 1, 64) + "%"
	case strings.HasSuffix(field, "_bytes") || field == "block_size":
		return humanBytes(f)
	}
	if math.Abs(f) >= 1e6 {
		return formatCount(f)
	}
	return formatCell(v)
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case uint32:
		return float64(x), true
	}
	return 0, false
}

func humanBytes(f float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for math.Abs(f) >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 || f == math.Trunc(f) {
		return strconv.FormatFloat(f, 'f', 0, 64) + " " + units[i]
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + " " + units[i]
}

func formatCount(f float64) string {
	switch a := math.Abs(f); {
	case a >= 1e9:
		return strconv.FormatFloat(f/1e9, 'f', 1, 64) + "G"
	case a >= 1e6:
		return strconv.FormatFloat(f/1e6, 'f', 1, 64) + "M"
	default:
		return strconv.FormatFloat(f/1e3, 'f', 1, 64) + "k"
	}
}

// Write prints JSON when asJSON is set and the table otherwise.
func (r *Report) Write(w io.Writer, asJSON bool) error {
	if asJSON {
		return r.WriteJSON(w)
	}
	return r.WriteTable(w)
}

func (r *Report) columns() []string {
	seen := map[string]bool{}
	var cols []string
	for _, c := range r.Columns {
		if !seen[c] {
			seen[c] = true
			cols = append(cols, c)
		}
	}
	var extra []string
	for _, row := range r.Results {
		for k := range row {
			if !seen[k] {
				seen[k] = true
				extra = append(extra, k)
			}
		}
	}
	sortStrings(extra)
	return append(cols, extra...)
}

func formatCell(v any) string {
	switch x := v.(type) {
	case nil:
		return "-"
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return "-"
		}
		switch a := math.Abs(x); {
		case a == 0:
			return "0"
		case a >= 1000:
			return strconv.FormatFloat(x, 'f', 0, 64)
		case a >= 1:
			return strconv.FormatFloat(x, 'f', 2, 64)
		default:
			return strconv.FormatFloat(x, 'g', 3, 64)
		}
	default:
		return fmt.Sprint(x)
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// ThinSamples keeps r's summary rows (those without "t_s") and every n-th
// sample row of each run, run telling the runs apart: a table a person
// reads, where the JSON keeps every sample.
func ThinSamples(r *Report, n int, run func(Row) any) *Report {
	out := &Report{Columns: r.Columns, Human: r.Human}
	seen := map[any]int{}
	for _, row := range r.Results {
		if _, ok := row["t_s"]; !ok {
			out.Add(row)
			continue
		}
		k := run(row)
		if seen[k]%n == n-1 {
			out.Add(row)
		}
		seen[k]++
	}
	return out
}
