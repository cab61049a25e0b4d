//go:build edgemqonly

package main

import (
	"context"
	"errors"
)

// runJetStream is not linked into the EdgeMQ child binary (see childBinaries).
func runJetStream(context.Context, job, string) (result, error) {
	return result{}, errors.New("this child binary runs EdgeMQ jobs only")
}
