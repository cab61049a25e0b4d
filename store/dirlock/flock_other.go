//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package dirlock

import (
	"errors"
	"os"
)

func tryLock(*os.File) (bool, error) { return false, errors.ErrUnsupported }

func unlock(*os.File) error { return errors.ErrUnsupported }
