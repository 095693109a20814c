package resp

// match reports whether s matches the glob pattern p with Redis's rules
// (KEYS, SCAN MATCH, CONFIG GET): '*' any run, '?' any byte, "[abc]",
// "[^abc]", "[a-z]" a class, '\' escapes the next byte.
//
// It backtracks only to the last '*', so it runs in O(len(p)*len(s)) even
// for patterns like "*a*a*a*b" that make naive matchers exponential.
func match(p, s []byte) bool {
	pi, si := 0, 0
	star, starS := -1, 0
	for si < len(s) {
		if pi < len(p) {
			switch p[pi] {
			case '*':
				for pi < len(p) && p[pi] == '*' {
					pi++
				}
				if pi == len(p) {
					return true
				}
				star, starS = pi, si
				continue
			case '?':
				pi++
				si++
				continue
			case '[':
				if n, ok := matchClass(p[pi:], s[si]); n > 0 {
					if ok {
						pi += n
						si++
						continue
					}
				}
			case '\\':
				if pi+1 < len(p) {
					if p[pi+1] == s[si] {
						pi += 2
						si++
						continue
					}
				} else if s[si] == '\\' {
					pi++
					si++
					continue
				}
			default:
				if p[pi] == s[si] {
					pi++
					si++
					continue
				}
			}
		}
		if star < 0 {
			return false
		}
		starS++
		pi, si = star, starS
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// matchClass matches c against the class at the start of p ("[...]") and
// returns the class's length in p. An unterminated class runs to the end
// of the pattern, as in Redis.
func matchClass(p []byte, c byte) (int, bool) {
	i := 1
	not := i < len(p) && p[i] == '^'
	if not {
		i++
	}
	ok := false
	for ; i < len(p) && p[i] != ']'; i++ {
		switch {
		case p[i] == '\\' && i+1 < len(p):
			i++
			if p[i] == c {
				ok = true
			}
		case i+2 < len(p) && p[i+1] == '-' && p[i+2] != ']':
			lo, hi := p[i], p[i+2]
			if lo > hi {
				lo, hi = hi, lo
			}
			if lo <= c && c <= hi {
				ok = true
			}
			i += 2
		default:
			if p[i] == c {
				ok = true
			}
		}
	}
	n := i
	if i < len(p) {
		n = i + 1 // the ']'
	}
	return n, ok != not
}
