package demo

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// TaxiOptions configures GenerateTaxi.
type TaxiOptions struct {
	OutDir    string // landing directory (yellow_tripdata_<landing>.<format>)
	ZonesPath string // where the zone lookup CSV is written (LocationID,Borough,Zone)
	Format    string // parquet | csv
	Landing   int    // 1, 2, …: landing L holds trips [(L-1)*Trips/2, (L-1)*Trips/2+Trips): each overlaps the one before by half
	Trips     int    // trips per landing
	Seed      uint64
}

// TaxiZones are the zones the generator's lookup file holds; location ids 264 and 265
// (the TLC's "unknown") are not in it.
var TaxiZones = [][3]string{
	{"1", "EWR", "Newark Airport"}, {"2", "Queens", "Jamaica Bay"}, {"3", "Bronx", "Allerton/Pelham Gardens"},
	{"4", "Manhattan", "Alphabet City"}, {"5", "Staten Island", "Arden Heights"}, {"6", "Brooklyn", "Bay Ridge"},
	{"7", "Queens", "Astoria"}, {"8", "Manhattan", "Battery Park"},
}

// Trip is one generated yellow-taxi trip, with the TLC's columns; nil is NULL.
type Trip struct {
	VendorID            int64
	Pickup              time.Time
	Dropoff             *time.Time
	PassengerCount      *float64
	RatecodeID          *float64
	PULocationID        int64
	DOLocationID        int64
	FareAmount          *float64
	TotalAmount         float64
	CongestionSurcharge *float64
	AirportFee          *float64
	StoreAndFwdFlag     string // not read by examples/taxi.yaml
}

var taxiStart = time.Date(2024, 10, 1, 0, 0, 0, 0, time.UTC)

// TaxiTrip returns trip i of a seed: a pure function of both, so overlapping landings
// deliver the same trip twice. About 2% have a negative fare, 1% no fare, 1% a total
// over 1000, 2% a pickup outside 2024, 2% a fractional passenger count, 5-10% NULL
// counts, rate codes, surcharges and fees, 1% no dropoff, 3% an unknown zone.
func TaxiTrip(seed uint64, i int) Trip {
	r := rand.New(rand.NewPCG(seed, uint64(i)))
	f := func(v float64) *float64 { return &v }
	money := func(lo, hi int) float64 { return float64(lo+r.IntN(hi-lo)) / 100 }
	t := Trip{VendorID: int64(1 + r.IntN(2))}
	// Unique pickups: one every 1999 s from 2024-10-01 (92 days hold ~3977 trips).
	t.Pickup = taxiStart.Add(time.Duration(i%3977) * 1999 * time.Second).Add(time.Duration(i/3977) * time.Second)
	switch p := r.IntN(100); {
	case p < 1:
		t.Pickup = t.Pickup.AddDate(-1, 0, 0) // 2023
	case p < 2:
		t.Pickup = t.Pickup.AddDate(1, 0, 0) // 2025
	}
	if r.IntN(100) > 0 {
		d := t.Pickup.Add(time.Duration(60+r.IntN(5400)) * time.Second)
		t.Dropoff = &d
	}
	switch p := r.IntN(100); {
	case p < 7:
	case p < 9:
		t.PassengerCount = f(2.5)
	default:
		t.PassengerCount = f(float64(1 + r.IntN(4)))
	}
	if r.IntN(100) >= 5 {
		t.RatecodeID = f(float64(1 + r.IntN(6)))
	}
	loc := func() int64 {
		if r.IntN(100) < 3 {
			return 264 + int64(r.IntN(2))
		}
		return int64(1 + r.IntN(len(TaxiZones)))
	}
	t.PULocationID, t.DOLocationID = loc(), loc()
	fare := money(300, 9000)
	switch p := r.IntN(100); {
	case p < 2:
		t.FareAmount = f(-fare)
	case p < 3:
	default:
		t.FareAmount = f(fare)
	}
	t.TotalAmount = fare + money(0, 2000)
	if r.IntN(100) == 0 {
		t.TotalAmount += 1000
	}
	t.TotalAmount = float64(int64(t.TotalAmount*100+0.5)) / 100
	if r.IntN(10) > 0 {
		t.CongestionSurcharge = f([]float64{0, 2.5}[r.IntN(2)])
	}
	if r.IntN(10) > 0 {
		t.AirportFee = f([]float64{0, 1.75}[r.IntN(2)])
	}
	t.StoreAndFwdFlag = []string{"N", "Y"}[r.IntN(2)]
	return t
}

// TaxiRange is the trip indexes of a landing.
func TaxiRange(landing, trips int) (from, to int) {
	from = (landing - 1) * trips / 2
	return from, from + trips
}

// GenerateTaxi writes one landing of yellow-taxi trips (Parquet with the TLC's types, or
// CSV as the TLC writes it: "2.0" counts, empty fields for NULL) and the zone lookup.
func GenerateTaxi(ctx context.Context, opt TaxiOptions) (string, error) {
	if opt.Landing < 1 || opt.Trips < 1 {
		return "", fmt.Errorf("taxi: landing and trips must be >= 1")
	}
	for _, d := range []string{opt.OutDir, filepath.Dir(opt.ZonesPath)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
	}
	var zb bytes.Buffer
	zw := csv.NewWriter(&zb)
	_ = zw.Write([]string{"LocationID", "Borough", "Zone"})
	for _, z := range TaxiZones {
		_ = zw.Write(z[:])
	}
	zw.Flush()
	if err := writeAtomic(opt.ZonesPath, zb.Bytes()); err != nil {
		return "", err
	}
	from, to := TaxiRange(opt.Landing, opt.Trips)
	trips := make([]Trip, 0, opt.Trips)
	for i := from; i < to; i++ {
		trips = append(trips, TaxiTrip(opt.Seed, i))
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	var b []byte
	var err error
	switch opt.Format {
	case "parquet":
		b, err = taxiParquet(trips)
	case "csv":
		b, err = taxiCSV(trips)
	default:
		return "", fmt.Errorf("taxi: unknown format %q (parquet or csv)", opt.Format)
	}
	if err != nil {
		return "", err
	}
	path := filepath.Join(opt.OutDir, fmt.Sprintf("yellow_tripdata_%d.%s", opt.Landing, opt.Format))
	return path, writeAtomic(path, b)
}

// writeAtomic writes a file through a hidden temporary name (never ingested half-written).
func writeAtomic(path string, b []byte) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

var taxiHeader = []string{"VendorID", "tpep_pickup_datetime", "tpep_dropoff_datetime", "passenger_count", "RatecodeID",
	"store_and_fwd_flag", "PULocationID", "DOLocationID", "fare_amount", "total_amount", "congestion_surcharge", "Airport_fee"}

func taxiCSV(trips []Trip) ([]byte, error) {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	ff := func(p *float64, oneDecimal bool) string {
		switch {
		case p == nil:
			return ""
		case oneDecimal && *p == float64(int64(*p)):
			return strconv.FormatFloat(*p, 'f', 1, 64) // the TLC's "2.0"
		}
		return strconv.FormatFloat(*p, 'f', -1, 64)
	}
	const ts = "2006-01-02 15:04:05"
	_ = w.Write(taxiHeader)
	for _, t := range trips {
		drop := ""
		if t.Dropoff != nil {
			drop = t.Dropoff.Format(ts)
		}
		tot := t.TotalAmount
		_ = w.Write([]string{strconv.FormatInt(t.VendorID, 10), t.Pickup.Format(ts), drop, ff(t.PassengerCount, true), ff(t.RatecodeID, true),
			t.StoreAndFwdFlag, strconv.FormatInt(t.PULocationID, 10), strconv.FormatInt(t.DOLocationID, 10),
			ff(t.FareAmount, false), ff(&tot, false), ff(t.CongestionSurcharge, false), ff(t.AirportFee, false)})
	}
	w.Flush()
	return b.Bytes(), w.Error()
}

func taxiParquet(trips []Trip) ([]byte, error) {
	ts := &arrow.TimestampType{Unit: arrow.Microsecond}
	f64, i64, str := arrow.PrimitiveTypes.Float64, arrow.PrimitiveTypes.Int64, arrow.BinaryTypes.String
	types := []arrow.DataType{i64, ts, ts, f64, f64, str, i64, i64, f64, f64, f64, f64}
	fields := make([]arrow.Field, len(taxiHeader))
	for i, n := range taxiHeader {
		fields[i] = arrow.Field{Name: n, Type: types[i], Nullable: true}
	}
	sch := arrow.NewSchema(fields, nil)
	rb := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer rb.Release()
	fl := func(i int, p *float64) {
		if p == nil {
			rb.Field(i).AppendNull()
		} else {
			rb.Field(i).(*array.Float64Builder).Append(*p)
		}
	}
	for _, t := range trips {
		rb.Field(0).(*array.Int64Builder).Append(t.VendorID)
		rb.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(t.Pickup.UnixMicro()))
		if t.Dropoff == nil {
			rb.Field(2).AppendNull()
		} else {
			rb.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(t.Dropoff.UnixMicro()))
		}
		fl(3, t.PassengerCount)
		fl(4, t.RatecodeID)
		rb.Field(5).(*array.StringBuilder).Append(t.StoreAndFwdFlag)
		rb.Field(6).(*array.Int64Builder).Append(t.PULocationID)
		rb.Field(7).(*array.Int64Builder).Append(t.DOLocationID)
		fl(8, t.FareAmount)
		tot := t.TotalAmount
		fl(9, &tot)
		fl(10, t.CongestionSurcharge)
		fl(11, t.AirportFee)
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()
	tbl := array.NewTableFromRecords(sch, []arrow.RecordBatch{rec})
	defer tbl.Release()
	var b bytes.Buffer
	if err := pqarrow.WriteTable(tbl, &b, 8192, nil, pqarrow.DefaultWriterProps()); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
