package kafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsrc"
)

var _ flightsrc.Ender = (*Source)(nil)

// End implements flightsrc.Ender: the end of a topic is, per partition,
// its last stable offset (read_committed, the default) or its high
// watermark (read_uncommitted), listed when End is called. A checkpoint
// covers it when its position for every partition that holds records
// (end above the log start) is at or past that offset. A reader's last
// batch of a quiet partition steps over trailing control records (see
// the package doc), so a transactional topic's end is reached too.
func (s *Source) End(ctx context.Context, stream string) (flightsrc.End, error) {
	if !s.offers(stream) {
		return flightsrc.End{}, fmt.Errorf("%w: kafka: this source does not read topic %q", flightline.ErrNotFound, stream)
	}
	var starts, ends kadm.ListedOffsets
	err := s.retry(ctx, "listing the end offsets of "+stream, func() (err error) {
		if starts, err = s.adm.ListStartOffsets(ctx, stream); err == nil {
			err = starts.Error()
		}
		if err != nil {
			return err
		}
		if s.cfg.readCommitted {
			ends, err = s.adm.ListCommittedOffsets(ctx, stream)
		} else {
			ends, err = s.adm.ListEndOffsets(ctx, stream)
		}
		if err == nil {
			err = ends.Error()
		}
		return err
	})
	if err != nil {
		return flightsrc.End{}, s.classify(fmt.Errorf("kafka: listing the end offsets of %q: %w", stream, err))
	}
	want, from := checkpoint.Positions{}, checkpoint.Positions{}
	ends.Each(func(o kadm.ListedOffset) {
		if st, ok := starts.Lookup(o.Topic, o.Partition); ok && o.Offset > st.Offset {
			want[key(o.Topic, o.Partition)] = o.Offset
			from[key(o.Topic, o.Partition)] = st.Offset
		}
	})
	return flightsrc.End{
		Desc: string(want.Encode()),
		Covered: func(_ context.Context, cp []byte) (bool, error) {
			if len(want) == 0 {
				return true, nil
			}
			if len(cp) == 0 {
				return false, nil
			}
			got, err := checkpoint.Parse(cp)
			if err != nil {
				return false, err
			}
			return checkpoint.Covers(got, want), nil
		},
		Left: func(_ context.Context, cp []byte) (int64, error) {
			got := checkpoint.Positions{}
			if len(cp) > 0 {
				var err error
				if got, err = checkpoint.Parse(cp); err != nil {
					return 0, err
				}
			}
			var n int64
			for k, end := range want {
				at, ok := got[k]
				if !ok || at < from[k] {
					at = from[k]
				}
				n += max(0, end-at)
			}
			return n, nil
		},
	}, nil
}
