package readlimit

// scanner counts the array elements of a JSON text, at any depth, as it streams by, and fails
// once there are more than max, or once arrays and objects nest deeper than MaxDepth. It only
// tracks strings (where brackets and commas do not count) and which containers are open: it
// validates nothing else, which the decoder after it does.
//
// Array elements are what a decoder turns into slice elements: `{}` or `0` in an array of
// structs is a whole zero struct, so they, not bytes, bound the memory a decoded answer takes.
type scanner struct {
	subject  string
	max      int64
	elements int64
	// open holds the containers open, innermost last: true for an array, false for an object.
	open     []bool
	inString bool
	escaped  bool
	// first is set right after '[': the next token is the array's first element, or ']'.
	first bool
}

func (s *scanner) scan(p []byte) error {
	for _, c := range p {
		if s.inString {
			switch {
			case s.escaped:
				s.escaped = false
			case c == '\\':
				s.escaped = true
			case c == '"':
				s.inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		if s.first {
			s.first = false
			if c != ']' {
				if err := s.element(); err != nil {
					return err
				}
			}
		}
		switch c {
		case '"':
			s.inString = true
		case '[', '{':
			if len(s.open) >= MaxDepth {
				return &Error{Subject: s.subject, Limit: countLimit(MaxDepth, "levels of nesting")}
			}
			s.open = append(s.open, c == '[')
			s.first = c == '['
		case ']', '}':
			if n := len(s.open); n > 0 {
				s.open = s.open[:n-1]
			}
		case ',':
			if n := len(s.open); n > 0 && s.open[n-1] {
				if err := s.element(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (s *scanner) element() error {
	if s.elements++; s.elements > s.max {
		return &Error{Subject: s.subject, Limit: countLimit(s.max, "array elements")}
	}
	return nil
}
