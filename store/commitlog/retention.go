package commitlog

import (
	"sort"
	"time"
)

func (l *Log) retentionLoop() {
	defer l.wg.Done()
	t := time.NewTicker(l.opts.RetentionInterval)
	defer t.Stop()
	for {
		select {
		case <-l.done:
			return
		case <-t.C:
		case <-l.rkick: // a roll left segments to delete
		}
		l.Retain()
	}
}

// Retain runs retention now: it deletes the oldest sealed segments that are past MaxAge, over
// MaxBytes, or while the file system is fuller than MaxUsedRatio, then unmaps idle segments
// beyond MaxMapped. It returns the number of segments deleted. It runs by itself every
// RetentionInterval.
func (l *Log) Retain() int {
	l.tick.Add(1)
	if l.opts.RetentionFloor != nil {
		l.floor.Store(l.opts.RetentionFloor())
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return 0
	}
	n := l.retainLocked(0)
	doomed := l.takeDoomedLocked()
	l.mu.Unlock()
	l.destroy(doomed)
	if len(doomed) > 0 {
		l.afterRetention()
	}
	l.unmapIdle()
	return n
}

func (l *Log) kickRetention() {
	select {
	case l.rkick <- struct{}{}:
	default:
	}
}

// takeDoomedLocked returns the segments retention took out of the log and leaves none.
func (l *Log) takeDoomedLocked() []*segment {
	d := l.doomed
	l.doomed = nil
	return d
}

// destroy deletes segments taken out of the log (a reader holding one keeps its mapping
// until it lets go) and makes the deletions durable. It needs no lock: the segments are no
// longer in the log.
func (l *Log) destroy(segs []*segment) {
	if len(segs) == 0 {
		return
	}
	l.stats.deleted(segs)
	for _, s := range segs {
		if err := s.markDeleted(l.fs); err != nil {
			l.lg.Warn("delete segment", "segment", s.path, "err", err)
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		l.lg.Warn("sync dir after retention", "err", err)
	}
}

func (l *Log) afterRetention() {
	if l.opts.OnRetention != nil {
		l.opts.OnRetention(l.minPos.Load())
	}
}

// retainLocked deletes what the retention rules ask for, counting extra bytes about to be
// added. Only flushed, sealed segments go; the active one never does.
func (l *Log) retainLocked(extra int64) int {
	segs := *l.segs.Load()
	now := l.opts.Now().UnixMilli()
	var usedRatio func(freed int64) float64
	if l.opts.MaxUsedRatio > 0 {
		if u, err := l.fs.Usage(l.dir); err != nil {
			l.lg.Warn("statfs failed: skipping the used-ratio rule", "err", err)
		} else if u.Total > 0 {
			usedRatio = func(freed int64) float64 {
				used := float64(u.Total) - float64(u.Free) - float64(freed)
				return used / float64(u.Total)
			}
		}
	}
	total := int64(len(segs))*l.opts.SegmentSize + extra
	durable := min(l.durable.Load(), l.floor.Load())
	n := 0
	for ; n < len(segs)-1; n++ {
		s, next := segs[n], segs[n+1]
		if s.base+s.size > durable { // unflushed, or held by the retention floor
			break
		}
		freed := int64(n) * l.opts.SegmentSize
		switch {
		case l.opts.MaxAge > 0 && now-next.baseTime > l.opts.MaxAge.Milliseconds():
			l.lg.Info("deleting segment past max age", "segment", s.path)
		case l.opts.MaxBytes > 0 && total-freed > l.opts.MaxBytes:
			l.lg.Info("deleting segment over the byte quota", "segment", s.path)
		case usedRatio != nil && usedRatio(freed) > l.opts.MaxUsedRatio:
			l.lg.Info("deleting segment: file system over its max used ratio", "segment", s.path)
		default:
			return l.dropLocked(n)
		}
	}
	return l.dropLocked(n)
}

// deleteOldestLocked deletes up to n of the oldest flushed sealed segments, whatever the
// retention rules say (the DropOldest policy of a full disk), but for those the retention
// floor holds.
func (l *Log) deleteOldestLocked(n int) int {
	segs := *l.segs.Load()
	durable := min(l.durable.Load(), l.floor.Load())
	k := 0
	for k < n && k < len(segs)-1 && segs[k].base+segs[k].size <= durable {
		l.lg.Warn("disk full: deleting the oldest segment to make room", "segment", segs[k].path)
		k++
	}
	return l.dropLocked(k)
}

// dropLocked takes the first n segments out of the log and queues them in doomed, for the
// caller to destroy once it has released mu.
func (l *Log) dropLocked(n int) int {
	if n == 0 {
		return 0
	}
	segs := *l.segs.Load()
	rest := append([]*segment(nil), segs[n:]...)
	l.minPos.Store(rest[0].base + HeaderSize)
	l.segs.Store(&rest)
	l.doomed = append(l.doomed, segs[:n]...)
	return n
}

// unmapIdle unmaps the least recently used idle sealed segments beyond MaxMapped.
func (l *Log) unmapIdle() {
	segs := *l.segs.Load()
	type idle struct {
		s    *segment
		last int64
	}
	var cands []idle
	for _, s := range segs[:len(segs)-1] {
		if last, ok := s.idleSince(); ok {
			cands = append(cands, idle{s, last})
		}
	}
	if len(cands) <= l.opts.MaxMapped {
		return
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].last < cands[j].last })
	for _, c := range cands[:len(cands)-l.opts.MaxMapped] {
		if err := c.s.unmapIdle(); err != nil {
			l.lg.Warn("unmap idle segment", "segment", c.s.path, "err", err)
		}
	}
}
