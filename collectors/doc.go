// Package collectors is the last step of podslo's data flow: at scrape time
// it turns the store's state into const metrics on an explicit registry. It
// never calls the API server.
package collectors
