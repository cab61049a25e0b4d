//go:build jetstreamonly

package main

import (
	"context"
	"errors"
)

// runEdgeMQ is not linked into the JetStream child binary (see childBinaries).
func runEdgeMQ(context.Context, job, string) (result, error) {
	return result{}, errors.New("this child binary runs JetStream jobs only")
}
