//go:build !linux

package pace

import "errors"

func newTimer() (timer, error) { return nil, errors.ErrUnsupported }
