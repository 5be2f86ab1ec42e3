// Package cmd holds podslo's command line: cobra commands whose flags,
// PODSLO_* environment variables and --config file are merged by viper into
// each component's Options.
package cmd
