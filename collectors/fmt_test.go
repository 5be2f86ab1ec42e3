package collectors

import "strconv"

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
func itoa(i int) string         { return strconv.Itoa(i) }
