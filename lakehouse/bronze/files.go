package bronze

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// FileSource is a landing directory of files to ingest.
type FileSource struct {
	Name        string // source name from the config (recorded in the snapshot summary)
	System      string // _source_system, e.g. "shop_file"
	Dir         string
	Pattern     string // glob inside Dir; "" = every file
	Format      string // jsonl | csv | parquet | "" (by extension)
	Compression string // auto | none | gzip | zstd
	CSVDelim    rune
	// CSVNulls are the CSV field texts that are written as JSON null (so Silver types them
	// as NULL: a default or ?? applies). nil means DefaultCSVNulls; an empty, non-nil
	// slice makes no field NULL.
	CSVNulls []string
	// Settle is how long a file must stay unchanged (size and mtime) before it is read: a
	// file modified less than Settle ago is looked at again after the rest of Settle, and
	// skipped until the next run if it changed meanwhile. 0 reads files at once.
	Settle time.Duration
	// TailWait bounds how long the unterminated end of an uncompressed JSON Lines file
	// waits for its newline. Such a file is read up to its last newline; the bytes after
	// it (a line its writer is still writing) are read by a later run, once their newline
	// has come or once the file has stayed unchanged for TailWait: then the writer is taken
	// to have finished the file without a final newline and the tail is its last line.
	// 0 reads the tail at once, as a line.
	TailWait time.Duration
}

// FileRecord is what Bronze remembers of an ingested landing file.
type FileRecord struct {
	Path     string `json:"path"`
	Size     int64  `json:"size"`
	ModTime  int64  `json:"mtime_ns"`
	Checksum string `json:"xxh64"`
	Rows     int64  `json:"rows"`
	Blank    int64  `json:"blank"`
	BatchID  string `json:"batch_id,omitempty"`
	// From is where this read started: the size ingested before, when the file grew
	// and only its appended lines were read (JSON Lines, uncompressed); 0 otherwise.
	From int64 `json:"from,omitempty"`
	// Tail is how many bytes the file had after Size that were not read: an unterminated
	// last line waiting for its newline (FileSource.TailWait). Size and Checksum cover
	// only what was read, so the next run resumes at Size.
	Tail int64 `json:"tail,omitempty"`
}

type landingFile struct {
	path    string
	size    int64
	modTime int64
	problem string // why the file cannot be read at all (dangling symlink, not a regular file), or ""
}

// list returns the complete landing files in name order. Hidden files and files still
// being written by convention (*.tmp, *.partial, *.inprogress) are skipped, as are
// directories. Symbolic links are followed; a dangling link or an entry that is not a
// regular file is returned with its problem set, to be reported and quarantined.
func (s FileSource) list() ([]landingFile, error) {
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		return nil, fmt.Errorf("list landing dir %s: %w", s.Dir, err)
	}
	var out []landingFile
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || hasAnySuffix(name, ".tmp", ".partial", ".inprogress") {
			continue
		}
		if s.Pattern != "" {
			ok, err := filepath.Match(s.Pattern, name)
			if err != nil {
				return nil, fmt.Errorf("pattern %q: %w", s.Pattern, err)
			}
			if !ok {
				continue
			}
		}
		path := filepath.Join(s.Dir, name)
		info, err := os.Stat(path) // follows a symbolic link
		switch {
		case err != nil && e.Type()&fs.ModeSymlink != 0:
			out = append(out, landingFile{path: path, problem: "dangling symbolic link: " + err.Error()})
			continue
		case err != nil:
			return nil, fmt.Errorf("stat %s: %w", name, err)
		case info.IsDir():
			continue
		case !info.Mode().IsRegular():
			out = append(out, landingFile{path: path, modTime: info.ModTime().UnixNano(), problem: "not a regular file (" + info.Mode().Type().String() + ")"})
			continue
		}
		out = append(out, landingFile{path: path, size: info.Size(), modTime: info.ModTime().UnixNano()})
	}
	slices.SortFunc(out, func(a, b landingFile) int { return strings.Compare(a.path, b.path) })
	return out, nil
}

func hasAnySuffix(s string, suffixes ...string) bool {
	for _, suf := range suffixes {
		if strings.HasSuffix(s, suf) {
			return true
		}
	}
	return false
}

// formatOf returns the record format and compression of a landing file.
func (s FileSource) formatOf(path string) (format, compression string, err error) {
	name := strings.ToLower(filepath.Base(path))
	compression = s.Compression
	if compression == "" || compression == "auto" {
		switch {
		case strings.HasSuffix(name, ".gz"):
			compression = "gzip"
		case strings.HasSuffix(name, ".zst"), strings.HasSuffix(name, ".zstd"):
			compression = "zstd"
		default:
			compression = "none"
		}
	}
	base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, ".gz"), ".zst"), ".zstd")
	format = s.Format
	if format == "" {
		switch filepath.Ext(base) {
		case ".jsonl", ".ndjson", ".json":
			format = "jsonl"
		case ".csv":
			format = "csv"
		case ".parquet":
			format = "parquet"
		default:
			return "", "", fmt.Errorf("%s: cannot tell the format from the extension; set format in the source", path)
		}
	}
	if format == "parquet" && compression != "none" {
		return "", "", fmt.Errorf("%s: a parquet file is compressed inside; %s around it is not supported", path, compression)
	}
	return format, compression, nil
}

// whole reports whether a landing file modified less than Settle ago is known to be
// complete without waiting: a Parquet file whose footer, which a writer writes last after
// every row group, is there at the size listed and parses (a file still being written
// ends in column data, not in a footer's length and magic). Other formats have no such
// end: they wait.
func (s FileSource) whole(f landingFile) bool {
	if s.Settle <= 0 || time.Since(time.Unix(0, f.modTime)) >= s.Settle {
		return false // no wait to save
	}
	if format, _, err := s.formatOf(f.path); err != nil || format != "parquet" {
		return false
	}
	fh, err := os.Open(f.path)
	if err != nil {
		return false
	}
	defer fh.Close()
	pf, err := file.NewParquetReader(io.NewSectionReader(fh, 0, f.size))
	if err != nil {
		return false
	}
	pf.Close()
	return true
}

// emitFunc receives one record's payload and its position in the file (ColSourcePos);
// the slice is only valid during the call.
type emitFunc func(payload []byte, pos int64) error

// readFile streams the records of one landing file to emit and returns the xxh64 of the
// file's bytes and the number of blank lines skipped. Only the first size bytes are read
// (the size seen when the file was listed): what a writer appends meanwhile is left for
// the next run.
func (s FileSource) readFile(ctx context.Context, path string, size int64, emit emitFunc) (checksum string, blank int64, err error) {
	return s.readFileFrom(ctx, path, 0, size, emit)
}

// readFileFrom is readFile from byte offset from (0, or a line boundary of an
// uncompressed JSON Lines file: see canResume); the checksum is of the whole [0, size).
// A record's position is where it starts in the file's (decompressed) bytes, so a read
// from an offset gives the lines the positions a read of the whole file would.
func (s FileSource) readFileFrom(ctx context.Context, path string, from, size int64, emit emitFunc) (checksum string, blank int64, err error) {
	format, compression, err := s.formatOf(path)
	if err != nil {
		return "", 0, err
	}
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	if format == "parquet" {
		if err := readParquet(ctx, io.NewSectionReader(f, 0, size), emit); err != nil {
			return "", 0, err
		}
		sum, err := checksumReader(io.NewSectionReader(f, 0, size))
		return sum, 0, err
	}
	h := xxhash.New()
	if from > 0 { // the prefix was ingested before: hashed, not read as records
		if _, err := io.Copy(h, io.LimitReader(f, from)); err != nil {
			return "", 0, err
		}
	}
	// Every byte read from the file passes through the hash; what the decoders leave
	// unread (a gzip trailer) is drained into it at the end.
	limited := io.LimitReader(f, size-from)
	var r io.Reader = bufio.NewReaderSize(io.TeeReader(limited, h), 1<<20)
	switch compression {
	case "gzip":
		zr, err := gzip.NewReader(r)
		if err != nil {
			return "", 0, fmt.Errorf("gzip: %w", err)
		}
		defer zr.Close()
		r = zr
	case "zstd":
		zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return "", 0, fmt.Errorf("zstd: %w", err)
		}
		defer zr.Close()
		r = zr
	}
	base := from
	if from == 0 {
		var bom int
		r, bom = skipBOM(r)
		base += int64(bom)
	}
	switch format {
	case "jsonl":
		blank, err = readLines(ctx, r, base, emit)
	case "csv":
		err = readCSV(ctx, r, base, s.CSVDelim, s.csvNulls(), emit)
	default:
		err = fmt.Errorf("unknown format %q", format)
	}
	if err != nil {
		return "", blank, err
	}
	// Drain what the decompressor did not need (gzip trailer) so the checksum covers the file.
	if _, err := io.Copy(io.Discard, io.TeeReader(limited, h)); err != nil {
		return "", blank, err
	}
	return fmt.Sprintf("%016x", h.Sum64()), blank, nil
}

// MaxRecordBytes bounds one record read from a landing file (a JSONL line, a CSV record)
// or a Kafka topic (whose client bounds a fetch response at its default 100 MiB).
// A longer JSONL line or Kafka value is not kept whole: it lands as an OversizedPrefix marker with its
// length and first bytes, which Silver quarantines as record_too_large; a longer CSV
// record fails its file (a runaway quote), which is quarantined.
const MaxRecordBytes = 16 << 20

// OversizedPrefix starts the raw_payload that stands for a record longer than
// MaxRecordBytes: OversizedPrefix + "<length>:" + the record's first oversizedHead bytes.
const OversizedPrefix = "\x00oversized:"

const oversizedHead = 1024

// oversizedPayload is the marker payload of a record of n bytes that starts with head.
func oversizedPayload(n int64, head []byte) []byte {
	head = head[:min(len(head), oversizedHead)]
	for len(head) > 0 && !utf8.Valid(head) { // do not cut a character in two
		head = head[:len(head)-1]
	}
	return append(strconv.AppendInt([]byte(OversizedPrefix), n, 10), append([]byte{':'}, head...)...)
}

// utf8BOM is dropped from the start of a JSONL or CSV file: it marks the encoding and is
// no part of the first record.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// skipBOM returns r without a leading UTF-8 byte order mark, and the bytes it skipped.
func skipBOM(r io.Reader) (io.Reader, int) {
	br := bufio.NewReaderSize(r, 1<<20)
	if b, err := br.Peek(len(utf8BOM)); err == nil && bytes.Equal(b, utf8BOM) {
		n, _ := br.Discard(len(utf8BOM))
		return br, n
	}
	return br, 0
}

// readLines emits every non-blank line without its "\n" terminator; every other byte,
// "\r" included, is kept. A line longer than MaxRecordBytes is emitted as its
// oversizedPayload, read through without holding it. A line's position is base plus the
// bytes of r before it.
func readLines(ctx context.Context, r io.Reader, base int64, emit emitFunc) (blank int64, err error) {
	br := bufio.NewReaderSize(r, 1<<20)
	var long []byte
	pos := base
	for n := 0; ; n++ {
		if n&0xfff == 0 {
			if err := ctx.Err(); err != nil {
				return blank, err
			}
		}
		line, err := br.ReadSlice('\n')
		total := int64(len(line))
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], line...)
			total = int64(len(line))
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				total += int64(len(line))
				if len(long) <= MaxRecordBytes {
					long = append(long, line...)
				}
			}
			line = long
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return blank, err
		}
		if len(line) > 0 {
			content := bytes.TrimSuffix(line, []byte{'\n'})
			if n := total; n > MaxRecordBytes {
				if err == nil { // the line ended with its "\n"
					n--
				}
				if n > MaxRecordBytes {
					content = oversizedPayload(n, line)
				}
			}
			if len(bytes.TrimSpace(content)) == 0 {
				blank++
			} else if eerr := emit(content, pos); eerr != nil {
				return blank, eerr
			}
		}
		pos += total
		if errors.Is(err, io.EOF) {
			return blank, nil
		}
	}
}

// DefaultCSVNulls are the CSV field texts read as NULL when a source sets no
// csv.null_values: the empty field.
var DefaultCSVNulls = []string{""}

// csvNulls is the set of CSV field texts this source reads as NULL.
func (s FileSource) csvNulls() map[string]bool {
	vals := s.CSVNulls
	if vals == nil {
		vals = DefaultCSVNulls
	}
	set := make(map[string]bool, len(vals))
	for _, v := range vals {
		set[v] = true
	}
	return set
}

// readCSV emits each record as a JSON object keyed by the header, in header order, so
// the header survives in every payload. Values stay strings, except a field whose text
// is in nulls, which is written as null; a field that is not valid UTF-8 is written as
// BinaryPrefix + base64, like a binary payload.
//
// A record's position is base plus the bytes of r before it (after the record before it:
// blank lines in between count as its own).
func readCSV(ctx context.Context, r io.Reader, base int64, delim rune, nulls map[string]bool, emit emitFunc) error {
	lr := &recordLimiter{r: r}
	cr := csv.NewReader(lr)
	if delim != 0 {
		cr.Comma = delim
	}
	cr.FieldsPerRecord = -1 // keep ragged rows: nothing is filtered in Bronze
	cr.ReuseRecord = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("csv header: %w", err)
	}
	header = slices.Clone(header)
	lr.start = cr.InputOffset()
	var buf []byte
	for n := 0; ; n++ {
		if n&0xfff == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		pos := base + lr.start
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("csv: %w", err)
		}
		lr.start = cr.InputOffset()
		buf = append(buf[:0], '{')
		for i, v := range rec {
			if i > 0 {
				buf = append(buf, ',')
			}
			name := fmt.Sprintf("_c%d", i)
			if i < len(header) {
				name = header[i]
			}
			buf = appendJSONString(buf, name)
			buf = append(buf, ':')
			if nulls[v] {
				buf = append(buf, "null"...)
				continue
			}
			buf = appendJSONString(buf, EncodePayload([]byte(v)))
		}
		buf = append(buf, '}')
		if err := emit(buf, pos); err != nil {
			return err
		}
	}
}

// recordLimiter fails the CSV reader once it has delivered more than MaxRecordBytes past
// the start of the record being read (encoding/csv keeps reading a quoted field to the
// end of the input).
type recordLimiter struct {
	r         io.Reader
	start     int64 // input offset where the current record starts (set by readCSV)
	delivered int64
}

func (l *recordLimiter) Read(p []byte) (int, error) {
	if l.delivered-l.start > MaxRecordBytes {
		return 0, fmt.Errorf("a record is longer than %d bytes (an unclosed quote?)", MaxRecordBytes)
	}
	n, err := l.r.Read(p)
	l.delivered += int64(n)
	return n, err
}

// readParquet emits each row as a JSON object (column name → value), at its row index.
func readParquet(ctx context.Context, f parquet.ReaderAtSeeker, emit emitFunc) error {
	pf, err := file.NewParquetReader(f)
	if err != nil {
		return fmt.Errorf("parquet: %w", err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 8192}, memory.DefaultAllocator)
	if err != nil {
		return fmt.Errorf("parquet: %w", err)
	}
	rr, err := fr.GetRecordReader(ctx, nil, nil)
	if err != nil {
		return fmt.Errorf("parquet: %w", err)
	}
	defer rr.Release()
	enc := newRowEncoder(rr.Schema())
	var buf bytes.Buffer
	var line []byte
	var row int64
	for rr.Next() {
		rec := rr.RecordBatch()
		if enc != nil {
			for i := range int(rec.NumRows()) {
				if line, err = enc.appendRow(line[:0], rec, i); err != nil {
					return fmt.Errorf("parquet to json: %w", err)
				}
				if err := emit(line, row); err != nil {
					return err
				}
				row++
			}
			continue
		}
		buf.Reset()
		if err := array.RecordToJSON(rec, &buf); err != nil {
			return fmt.Errorf("parquet to json: %w", err)
		}
		for line := range bytes.Lines(buf.Bytes()) {
			if err := emit(bytes.TrimSuffix(line, []byte{'\n'}), row); err != nil {
				return err
			}
			row++
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("parquet: %w", err)
	}
	return nil
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string literal (s must be valid UTF-8).
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// checksumFile returns the xxh64 of a file's bytes, as recorded in FileRecord.Checksum.
func checksumFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sum, err := checksumReader(f)
	if err != nil {
		return "", fmt.Errorf("checksum %s: %w", path, err)
	}
	return sum, nil
}

func checksumReader(r io.Reader) (string, error) {
	h := xxhash.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return fmt.Sprintf("%016x", h.Sum64()), nil
}

// canResume tells whether a landing file that grew since prev was ingested can be read
// from where the last read stopped: uncompressed JSON Lines whose first prev.Size bytes
// are unchanged (xxh64) and end with a "\n", so that the new bytes are whole new lines.
func (s FileSource) canResume(f landingFile, prev FileRecord) bool {
	format, compression, err := s.formatOf(f.path)
	if err != nil || format != "jsonl" || compression != "none" || prev.Size == 0 || f.size <= prev.Size {
		return false
	}
	fh, err := os.Open(f.path)
	if err != nil {
		return false
	}
	defer fh.Close()
	last := make([]byte, 1)
	if _, err := fh.ReadAt(last, prev.Size-1); err != nil || last[0] != '\n' {
		return false
	}
	sum, err := checksumReader(io.NewSectionReader(fh, 0, prev.Size))
	return err == nil && sum == prev.Checksum
}

// readEnd returns where a read of f that starts at from stops: just after the last "\n"
// in [from, f.size) of an uncompressed JSON Lines file whose tail is still open (from,
// when there is none), else f.size. The tail is closed once the file has been unchanged
// for TailWait (now - mtime), or at once with TailWait 0. Only the tail is scanned, from
// its end backwards, in 64 KiB reads.
func (s FileSource) readEnd(f landingFile, from int64, now time.Time) (int64, error) {
	format, compression, err := s.formatOf(f.path)
	if err != nil || format != "jsonl" || compression != "none" || s.TailWait <= 0 ||
		now.Sub(time.Unix(0, f.modTime)) >= s.TailWait {
		return f.size, nil
	}
	fh, err := os.Open(f.path)
	if err != nil {
		return 0, err
	}
	defer fh.Close()
	buf := make([]byte, 64<<10)
	for end := f.size; end > from; {
		start := max(from, end-int64(len(buf)))
		chunk := buf[:end-start]
		if _, err := fh.ReadAt(chunk, start); err != nil {
			return 0, fmt.Errorf("find the last line of %s: %w", f.path, err)
		}
		if i := bytes.LastIndexByte(chunk, '\n'); i >= 0 {
			return start + int64(i) + 1, nil
		}
		end = start
	}
	return from, nil
}
