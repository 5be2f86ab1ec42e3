// Package pipeline is the stage of podslo's data flow between the watch and
// the store: informers hand it each pod, it runs lifecycle's step on the
// remembered state and writes the change, retrying what fails.
package pipeline
