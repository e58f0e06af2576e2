package demo

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// EventsOptions configures GenerateEvents.
type EventsOptions struct {
	OutDir  string // landing directory (events_<landing>.jsonl)
	Landing int    // 1, 2, …: landing L holds the stream's events [(L-1)*Events/2, (L-1)*Events/2+Events)
	Events  int    // stream events per landing (retries, late arrivals and re-sends come on top)
	Seed    uint64
}

// EventsStats counts what one landing holds, by why it is there.
type EventsStats struct {
	Path        string
	Lines       int // every line written
	Stream      int // the landing's range of the stream (half of it re-delivers the landing before)
	Retries     int // a line written twice in the file
	Late        int // new events with an event time days before the landing's range
	Redelivered int // landing-1 events sent again with their original event time (landing >= 3)
	Resent      int // events sent again with a later event time, beyond a 1-day lookback (landing >= 3)
	ResentNear  int // events sent again with an event time 6 hours later (landing >= 2)
}

// EventsStart is the event time of the stream's first event; event i comes 10 minutes
// (plus up to a minute) after event i-1.
var EventsStart = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

// EventSources are the values of the source column, the second half of the event key.
var EventSources = []string{"ios", "android", "web"}

// eventTypes are the valid event types; "heartbeat" is not one (rule F2).
var eventTypes = []string{"view", "view", "view", "click", "click", "add_to_cart", "purchase"}

// Event is one app event as a landing line writes it: each field is its JSON text, and ""
// leaves the field out.
type Event struct {
	EventID, Source, UserID, EventType, EventTime, DurationMS, Amount, Country string
}

// JSON is the event's landing line (without the newline).
func (ev Event) JSON() []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for _, f := range [...]struct{ k, v string }{{"event_id", ev.EventID}, {"source", ev.Source}, {"user_id", ev.UserID},
		{"event_type", ev.EventType}, {"event_time", ev.EventTime}, {"duration_ms", ev.DurationMS},
		{"amount", ev.Amount}, {"country", ev.Country}} {
		if f.v == "" {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(f.k) + ":" + f.v)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// EventTimeOf is the event time of stream event i (before any bad-row change).
func EventTimeOf(seed uint64, i int) time.Time {
	r := rand.New(rand.NewPCG(seed, uint64(i)^0x9e3779b97f4a7c15))
	return EventsStart.Add(time.Duration(i)*10*time.Minute + time.Duration(r.IntN(60))*time.Second)
}

// StreamEvent returns stream event i of a seed: a pure function of both, so overlapping
// landings deliver the same line twice. Its key is (e<i/3>, EventSources[i%3]). About 1%
// have a NULL event_id, 1% no source, 1% a duration that is not an integer, 1% an event
// time that is not a time, 2% a negative duration (F1), 2% the type "heartbeat" (F2);
// 10% have no country.
func StreamEvent(seed uint64, i int) Event {
	return event(seed, i, EventTimeOf(seed, i), true)
}

// event builds event i with event time at; bad lets it be one of the bad rows.
func event(seed uint64, i int, at time.Time, bad bool) Event {
	r := rand.New(rand.NewPCG(seed, uint64(i)))
	ev := Event{
		EventID:    strconv.Quote(fmt.Sprintf("e%06d", i/3)),
		Source:     strconv.Quote(EventSources[i%3]),
		UserID:     strconv.Quote(fmt.Sprintf("u%03d", r.IntN(60))),
		EventType:  strconv.Quote(eventTypes[r.IntN(len(eventTypes))]),
		EventTime:  strconv.Quote(at.Format(time.RFC3339)),
		DurationMS: strconv.Itoa(r.IntN(30000)),
		Country:    strconv.Quote([]string{"DE", "FR", "US", "BR", "JP"}[r.IntN(5)]),
	}
	if ev.EventType == `"purchase"` {
		ev.Amount = strconv.Quote(fmt.Sprintf("%d.%02d", 1+r.IntN(200), r.IntN(100)))
	}
	if r.IntN(10) == 0 {
		ev.Country = ""
	}
	p := r.IntN(100)
	if !bad {
		return ev
	}
	switch {
	case p < 1:
		ev.EventID = "null"
	case p < 2:
		ev.Source = ""
	case p < 3:
		ev.DurationMS = strconv.Quote(ev.DurationMS + "ms")
	case p < 4:
		ev.EventTime = `"yesterday"`
	case p < 6:
		ev.DurationMS = "-" + ev.DurationMS
		if ev.DurationMS == "-0" {
			ev.DurationMS = "-1"
		}
	case p < 8:
		ev.EventType, ev.Amount = `"heartbeat"`, ""
	}
	return ev
}

// EventsRange is the stream indexes of a landing.
func EventsRange(landing, events int) (from, to int) {
	from = (landing - 1) * events / 2
	return from, from + events
}

// GenerateEvents writes one landing of the app event stream, as JSON lines: the landing's
// range of the stream (overlapping the landing before by half), ~3% of its lines retried
// later in the file, ~5% late arrivals (new events 3 days older than the range), and from
// landing 2 on events sent again: landing 1's events with their original time (landing
// >= 3), restamped with this landing's time (beyond a 1-day lookback, landing >= 3) and
// the previous landing's events restamped 6 hours later (within it). Deterministic for a
// seed and a landing.
func GenerateEvents(ctx context.Context, opt EventsOptions) (EventsStats, error) {
	if opt.Landing < 1 || opt.Events < 2 {
		return EventsStats{}, fmt.Errorf("events: landing must be >= 1 and events >= 2")
	}
	if err := os.MkdirAll(opt.OutDir, 0o755); err != nil {
		return EventsStats{}, err
	}
	r := rand.New(rand.NewPCG(opt.Seed, uint64(opt.Landing)<<32))
	st := EventsStats{Path: filepath.Join(opt.OutDir, fmt.Sprintf("events_%d.jsonl", opt.Landing))}
	var lines [][]byte
	from, to := EventsRange(opt.Landing, opt.Events)
	half := opt.Events / 2
	for i := from; i < to; i++ {
		lines = append(lines, StreamEvent(opt.Seed, i).JSON())
		st.Stream++
	}
	// Re-sends of good events (never a bad row: the counts stay what they say).
	good := func(i int) Event { return event(opt.Seed, i, EventTimeOf(opt.Seed, i), false) }
	isBad := func(i int) bool { return StreamEvent(opt.Seed, i) != good(i) }
	picked := map[int]bool{} // one re-send of an event per landing: two would tie on arrival
	pick := func(lo int) (int, bool) {
		i := lo + r.IntN(half)
		if picked[i] || isBad(i) {
			return 0, false
		}
		picked[i] = true
		return i, true
	}
	if opt.Landing >= 3 {
		for k := 0; k < half/10; k++ {
			i, ok := pick(0) // landing 1 alone holds [0, half)
			if !ok {
				continue
			}
			if k%2 == 0 {
				lines = append(lines, good(i).JSON())
				st.Redelivered++
			} else {
				lines = append(lines, event(opt.Seed, i, EventTimeOf(opt.Seed, to-1), false).JSON())
				st.Resent++
			}
		}
	}
	if opt.Landing >= 2 {
		for k := 0; k < half/20; k++ {
			i, ok := pick(from - half) // not in this landing's range
			if !ok {
				continue
			}
			lines = append(lines, event(opt.Seed, i, EventTimeOf(opt.Seed, i).Add(6*time.Hour), false).JSON())
			st.ResentNear++
		}
	}
	// Late arrivals: new keys, event times 3 days before the range.
	for j := 0; j < opt.Events/20; j++ {
		i := 3*(1_000_000+opt.Landing*10_000+j) + j%3
		at := EventTimeOf(opt.Seed, from).Add(-72*time.Hour + time.Duration(j)*time.Minute)
		lines = append(lines, event(opt.Seed, i, at, false).JSON())
		st.Late++
	}
	// Shuffle the extras into the stream, then retry ~3% of lines later in the file.
	r.Shuffle(len(lines), func(a, b int) { lines[a], lines[b] = lines[b], lines[a] })
	for n := len(lines) * 3 / 100; n > 0; n-- {
		at := r.IntN(len(lines))
		to := at + 1 + r.IntN(len(lines)-at)
		lines = append(lines[:to], append([][]byte{lines[at]}, lines[to:]...)...)
		st.Retries++
	}
	if err := ctx.Err(); err != nil {
		return EventsStats{}, err
	}
	var b bytes.Buffer
	for _, l := range lines {
		b.Write(l)
		b.WriteByte('\n')
	}
	st.Lines = len(lines)
	return st, writeAtomic(st.Path, b.Bytes())
}
