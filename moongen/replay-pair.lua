--- wirelat testbed: replay the pcaps of a wirelat trace pair into a bump-in-the-wire appliance,
--- one pcap per MoonGen port, all on one clock, and optionally capture what comes back and
--- measure the appliance's latency with hardware-timestamped PTP probes.
---
---   ./build/MoonGen /path/to/wirelat/moongen/replay-pair.lua --dev 0 --dev 1 \
---       pair/a_port0.pcap pair/a_port1.pcap [-r 1] [-l 1] [--capture out/cap] [--latency lat.csv]
---
--- The n-th --dev sends the n-th pcap. Every frame is due (t - t0) / rate-multiplier after a
--- common start, t0 being the earliest timestamp of all the pcaps, so the timing *between* the
--- ports is kept, unlike examples/pcap/replay-pcap.lua, which starts each file's first frame at
--- once. One task replays all the pcaps merged by timestamp (ties: the earlier --dev first), so
--- a frame is never handed to its driver before an earlier frame of another port, however late
--- the task runs: a response never leaves before its request. (The first version ran one task
--- per port; on a loaded 2-CPU machine their lateness differed by up to 270 ms and a quarter of
--- the responses left before their requests.) Pass k of a loop starts k periods after the
--- start, a period being the pcaps' span plus their mean gap (the same rule as `wirelat replay`).
---
--- Run here over veth pairs (net_af_packet) into `wirelat run`: scripts/moongen-replay.sh.
--- --latency needs hardware timestamps and was not run (virtual devices have none).

local mg     = require "moongen"
local device = require "device"
local memory = require "memory"
local stats  = require "stats"
local log    = require "log"
local pcap   = require "pcap"
local ts     = require "timestamping"
local hist   = require "histogram"
local ffi    = require "ffi"

-- pcap file format (the pcap module declares pcap_hdr_t and pcaprec_hdr_t).
local NS_MAGIC = 0xa1b23c4d
local FILE_HEADER_BYTES = 24
local RECORD_HEADER_BYTES = 16
-- mbufs per replay task; a power of two minus one, as DPDK prefers.
local POOL_MBUFS = 4095

function configure(parser)
	parser:description("Replay wirelat trace-pair pcaps into a bump-in-the-wire appliance on a common clock.")
	parser:option("-d --dev", "MoonGen port that sends the pcap of the same position (repeat per pcap)."):args(1):count("1+"):convert(tonumber):target("devs")
	parser:argument("pcaps", "The pcaps, one per --dev, e.g. a_port0.pcap a_port1.pcap."):args("+")
	parser:option("-r --rate-multiplier", "Divide the recorded gaps by this; 1 = recorded timing, 0 = as fast as possible."):default(1):convert(tonumber):target("rateMultiplier")
	parser:option("-l --loops", "Passes over the pcaps; 0 = until interrupted."):default(1):convert(tonumber)
	parser:option("-c --capture", "Write what each port receives to PREFIX-port<id>.pcap (software timestamps)."):target("capture")
	parser:option("--latency", "Measure the appliance's latency from the first to the second port with hardware-timestamped PTP probes; write the histogram (CSV) here."):target("latency")
	parser:option("--probe-interval-us", "Gap between two latency probes."):default(1000):convert(tonumber):target("probeIntervalUs")
	parser:option("--buf-size", "Mbuf size; frames longer than this minus 128 bytes are truncated by libmoon's pcap reader."):default(2048):convert(tonumber):target("bufSize")
	parser:option("--keep-gaps", "1: a frame handed to the driver late delays the next ones, so no two frames leave closer together than in the pcaps (a late replay stretches instead of bunching a request and its response together); 0: every frame at its due time or at once if overdue."):default(1):convert(tonumber):target("keepGaps")
	parser:option("--start-delay-ms", "Time given to every task to get ready before the first frame is due."):default(500):convert(tonumber):target("startDelayMs")
	parser:option("--flush-ms", "Keep capturing this long after the last frame was sent."):default(1000):convert(tonumber):target("flushMs")
	local args = parser:parse()
	if #args.devs ~= #args.pcaps then
		parser:error(string.format("give one --dev per pcap (%d --dev, %d pcaps)", #args.devs, #args.pcaps))
	end
	if not (args.rateMultiplier >= 0) then
		parser:error("--rate-multiplier must be >= 0")
	end
	if not (args.loops >= 0) then
		parser:error("--loops must be >= 0")
	end
	if args.latency and #args.devs < 2 then
		parser:error("--latency needs two ports: probes leave the first and come back on the second")
	end
	return args
end

-- True if the reader's file has nanosecond timestamps.
local function isNanosecond(reader)
	return ffi.cast("pcap_hdr_t*", reader.ptr).magic_number == NS_MAGIC
end

-- The record at byte offset `off`: its seconds, its sub-second part in ns, its captured length.
local function record(reader, off, nano)
	local rec = ffi.cast("pcaprec_hdr_t*", reader.ptr + off)
	local frac = nano and rec.ts_usec or rec.ts_usec * 1000
	return rec.ts_sec, frac, rec.incl_len
end

-- First and last timestamp (seconds, ns) and the number of records of a pcap, walking the
-- records the way libmoon's reader does.
local function summarize(file)
	local reader = pcap:newReader(file)
	local nano = isNanosecond(reader)
	local off = FILE_HEADER_BYTES
	local s = { count = 0 }
	while off + RECORD_HEADER_BYTES <= reader.size do
		local sec, frac, len = record(reader, off, nano)
		if off + RECORD_HEADER_BYTES + len > reader.size then
			log:warn("%s: truncated last record ignored", file)
			break
		end
		if s.count == 0 then
			s.firstSec, s.firstNs = sec, frac
		end
		s.lastSec, s.lastNs = sec, frac
		s.count = s.count + 1
		off = off + RECORD_HEADER_BYTES + len
	end
	reader:close()
	return s
end

function master(args)
	-- The common clock: times are ns relative to baseSec, small enough for a Lua number.
	local summaries = {}
	local baseSec
	for i, file in ipairs(args.pcaps) do
		summaries[i] = summarize(file)
		if summaries[i].count == 0 then
			log:warn("%s has no frames: port %d sends nothing", file, args.devs[i])
		elseif not baseSec or summaries[i].firstSec < baseSec then
			baseSec = summaries[i].firstSec
		end
	end
	if not baseSec then
		log:fatal("the pcaps hold no frames")
	end
	local t0, tLast, frames = math.huge, 0, 0
	for _, s in ipairs(summaries) do
		if s.count > 0 then
			t0 = math.min(t0, (s.firstSec - baseSec) * 1e9 + s.firstNs)
			tLast = math.max(tLast, (s.lastSec - baseSec) * 1e9 + s.lastNs)
			frames = frames + s.count
		end
	end
	local spanNs = tLast - t0
	local periodNs = spanNs + (frames > 1 and spanNs / (frames - 1) or 0)
	log:info("%d frames over %.6f s of trace time; loop period %.6f s", frames, spanNs / 1e9, periodNs / 1e9)

	local queues = args.latency and 2 or 1
	local devs = {}
	for i, port in ipairs(args.devs) do
		-- Keep VLAN tags on receive so captures compare byte for byte with the pcaps.
		devs[i] = device.config{ port = port, rxQueues = queues, txQueues = queues, stripVlan = false }
	end
	device.waitForLinks()
	stats.startStatsTask{ devices = devs }

	if args.capture then
		for i, dev in ipairs(devs) do
			mg.startTask("captureTask", dev:getRxQueue(0), string.format("%s-port%d.pcap", args.capture, args.devs[i]))
		end
	end
	if args.latency then
		mg.startSharedTask("latencyTask", devs[1]:getTxQueue(1), devs[2]:getRxQueue(1), args.latency, args.probeIntervalUs)
	end

	local hz = mg.getCyclesFrequency()
	local startCycles = tonumber(mg.getCycles()) + args.startDelayMs / 1000 * hz
	local queues = {}
	for i, dev in ipairs(devs) do
		queues[i] = dev:getTxQueue(0)
	end
	mg.startTask("replayTask", queues, args.pcaps, baseSec, t0, periodNs, startCycles, args):wait()
	-- Let the appliance forward the last frames and the capture tasks write them.
	mg.sleepMillisIdle(args.flushMs)
	mg.stop()
	mg.waitForTasks()
end

-- The head frame of one pcap: its mbuf and when it is due (TSC cycles).
local function readHead(st, mem, args, passStart, baseSec, t0, cyclesPerNs)
	local off = st.reader.offset
	local buf = st.reader:readSingle(mem, args.bufSize)
	if not buf then
		st.buf = nil
		return
	end
	local sec, frac = record(st.reader, off, st.nano)
	st.buf = buf
	st.due = passStart + ((sec - baseSec) * 1e9 + frac - t0) * cyclesPerNs
end

function replayTask(queues, files, baseSec, t0, periodNs, startCycles, args)
	local mem = memory.createMemPool{ n = POOL_MBUFS, bufSize = args.bufSize }
	local paced = args.rateMultiplier > 0
	local cyclesPerNs = paced and mg.getCyclesFrequency() / 1e9 / args.rateMultiplier or 0
	local streams = {}
	for i, file in ipairs(files) do
		local reader = pcap:newReader(file)
		streams[i] = { file = file, queue = queues[i], reader = reader, nano = isNanosecond(reader),
			sent = 0, retries = 0, lateSum = 0, lateMax = 0 }
	end
	local pass, passStart, unsent = 0, startCycles, 0
	-- With --keep-gaps, the previous frame's due time and the time it was handed over.
	local prevDue, prevSent
	for _, st in ipairs(streams) do
		readHead(st, mem, args, passStart, baseSec, t0, cyclesPerNs)
	end
	while mg.running() and tonumber(mg.getCycles()) < startCycles do end
	local firstCycles = tonumber(mg.getCycles())
	local lastCycles = firstCycles
	while mg.running() do
		-- The earliest head of all the pcaps (ties: the earlier --dev).
		local next
		for _, st in ipairs(streams) do
			if st.buf and (not next or st.due < next.due) then
				next = st
			end
		end
		if not next then
			pass = pass + 1
			if args.loops ~= 0 and pass >= args.loops then
				break
			end
			passStart = startCycles + pass * periodNs * cyclesPerNs
			for _, st in ipairs(streams) do
				st.reader:reset()
				readHead(st, mem, args, passStart, baseSec, t0, cyclesPerNs)
			end
		else
			local due = next.due
			if paced and args.keepGaps ~= 0 and prevDue then
				due = math.max(due, prevSent + (next.due - prevDue))
			end
			if paced then
				while mg.running() and tonumber(mg.getCycles()) < due do end
			end
			-- A full tx ring is retried, never dropped; only a stop leaves a frame unsent.
			local now = tonumber(mg.getCycles())
			while next.queue:trySendSingle(next.buf) == 0 do
				next.retries = next.retries + 1
				if not mg.running() then
					break
				end
			end
			if not mg.running() then
				break
			end
			next.sent = next.sent + 1
			prevDue, prevSent = next.due, now
			if paced then
				local late = now - next.due
				next.lateSum = next.lateSum + late
				next.lateMax = math.max(next.lateMax, late)
			end
			lastCycles = now
			readHead(next, mem, args, passStart, baseSec, t0, cyclesPerNs)
		end
	end
	local hz = mg.getCyclesFrequency()
	for _, st in ipairs(streams) do
		if st.buf then
			-- Interrupted: the head read but not sent.
			st.buf:free()
			unsent = unsent + 1
		end
		st.reader:close()
		log:info("%s -> %s: sent %d frames in %d passes over %.6f s, %d tx retries",
			st.file, tostring(st.queue), st.sent, pass, (lastCycles - firstCycles) / hz, st.retries)
		if paced and st.sent > 0 then
			log:info("%s: lateness (handed to the driver minus due) mean %.0f ns, max %.0f ns",
				st.file, st.lateSum / st.sent / hz * 1e9, st.lateMax / hz * 1e9)
		end
	end
	log:info("replay: %d frames read but not sent (stopped)", unsent)
end

function captureTask(queue, file)
	local writer = pcap:newWriter(file)
	local bufs = memory.bufArray()
	local n = 0
	while mg.running() do
		local rx = queue:tryRecv(bufs, 100)
		-- TSC seconds; the writer maps them to wall-clock time.
		local now = mg.getTime()
		for i = 1, rx do
			writer:writeBuf(now, bufs[i])
			bufs[i]:free()
		end
		n = n + rx
	end
	writer:close()
	log:info("captured %d frames into %s", n, file)
end

function latencyTask(txQueue, rxQueue, file, intervalUs)
	local timestamper = ts:newTimestamper(txQueue, rxQueue)
	local h = hist:new()
	local lost = 0
	mg.sleepMillis(1000) -- let the replay start first
	while mg.running() do
		local lat = timestamper:measureLatency()
		if lat then
			h:update(lat)
		else
			lost = lost + 1
		end
		mg.sleepMicrosIdle(intervalUs)
	end
	h:print()
	h:save(file)
	log:info("latency probes: %d lost or untimestamped; histogram in %s", lost, file)
end
