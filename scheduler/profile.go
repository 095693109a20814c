package scheduler

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// maxProfileLines bounds a profile; real ones have hundreds of samples.
const maxProfileLines = 1 << 20

type profileRow struct {
	line int
	v    []float64
}

// readProfile reads a small numeric CSV whose first non-comment line is
// exactly header. Values must be finite and non-negative.
func readProfile(r io.Reader, header []string) ([]profileRow, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	var (
		rows      []profileRow
		line      int
		sawHeader bool
	)
	for sc.Scan() {
		line++
		if line > maxProfileLines {
			return nil, fmt.Errorf("%w: more than %d lines", ErrProfile, maxProfileLines)
		}
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		fields := strings.Split(s, ",")
		for i := range fields {
			fields[i] = strings.TrimSpace(fields[i])
		}
		if !sawHeader {
			if strings.Join(fields, ",") != strings.Join(header, ",") {
				return nil, fmt.Errorf("%w: line %d: header %q, want %q", ErrProfile, line, s, strings.Join(header, ","))
			}
			sawHeader = true
			continue
		}
		if len(fields) != len(header) {
			return nil, fmt.Errorf("%w: line %d: %d fields, want %d (%s)", ErrProfile, line, len(fields), len(header), strings.Join(header, ","))
		}
		row := profileRow{line: line, v: make([]float64, len(fields))}
		for i, f := range fields {
			x, err := strconv.ParseFloat(f, 64)
			if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
				return nil, fmt.Errorf("%w: line %d: %s %q is not a finite non-negative number", ErrProfile, line, header[i], f)
			}
			row.v[i] = x
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: line %d: %v", ErrProfile, line+1, err)
	}
	if !sawHeader {
		return nil, fmt.Errorf("%w: empty; want the header %q and samples", ErrProfile, strings.Join(header, ","))
	}
	return rows, nil
}
