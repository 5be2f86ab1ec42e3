// Package cmd holds podslo's command line: cobra commands whose flags each
// component binds to its Options (AddFlags), and which take the PODSLO_*
// environment variables and the --config file, read with viper, strictly,
// for every flag the command line leaves alone.
package cmd
