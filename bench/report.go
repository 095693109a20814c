package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Row is one measured case: a flat object with a "name" and its figures.
// Values should be strings, bools, integers or floats.
type Row map[string]any

// Report collects rows and prints them.
type Report struct {
	Results []Row `json:"results"`
	// Columns orders the table; columns not listed follow in sorted order.
	Columns []string `json:"-"`
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

// WriteTable writes the report as an aligned text table.
func (r *Report) WriteTable(w io.Writer) error {
	cols := r.columns()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(cols, "\t")+"\t")
	for _, row := range r.Results {
		cells := make([]string, len(cols))
		for i, c := range cols {
			cells[i] = formatCell(row[c])
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	return tw.Flush()
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
