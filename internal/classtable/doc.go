// Package classtable summarizes sandbox creation per runtime and storage
// class from the store, for the exporter's landing page and /api/v1/classes,
// and prints that summary for `podslo demo`. It never calls the API server.
package classtable
