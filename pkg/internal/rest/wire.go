package rest

// each converts a slice; nil stays nil (a field without omitempty then reads null, as it
// did before the conversion).
func each[T, U any](in []T, f func(T) U) []U {
	if in == nil {
		return nil
	}
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}
