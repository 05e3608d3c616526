/** The vouching pages' camera: preview and MediaRecorder for the elements <p>-preview, -start, -stop, -status. */
import { $, alertBox } from './dom.js';

/** The service's limit on a video (src/auth/factors/vouch). */
const LIMIT = 20 * 1024 * 1024;
const MAX_SECONDS = 20;

export interface Recorder {
  open(): void;
  close(): void;
}

export function recorderUI(p: string, onBlob: (blob: Blob) => void): Recorder {
  let stream: MediaStream | null = null;
  let recorder: MediaRecorder | null = null;
  const ui: Recorder = {
    open() {
      if (!navigator.mediaDevices || !window.MediaRecorder) {
        alertBox('error', 'This browser cannot record video here. Use another browser.');
        return;
      }
      navigator.mediaDevices.getUserMedia({ video: true, audio: true }).then(
        (s) => {
          stream = s;
          const v = $<HTMLVideoElement>(`${p}-preview`);
          v.srcObject = s;
          v.play().catch(() => {});
          $(`${p}-status`).textContent = 'Camera ready.';
        },
        (e: Error | null) => {
          alertBox(
            'error',
            `The camera could not be opened: ${e?.name ? e.name : e}. Allow camera and microphone, then reload.`,
          );
        },
      );
    },
    close() {
      if (stream) for (const t of stream.getTracks()) t.stop();
      stream = null;
    },
  };
  $(`${p}-start`).addEventListener('click', () => {
    if (!stream) {
      alertBox('error', 'The camera is not ready yet.');
      return;
    }
    const types = ['video/webm;codecs=vp8,opus', 'video/webm;codecs=vp9,opus', 'video/webm'];
    const type = types.filter((t) => MediaRecorder.isTypeSupported(t))[0];
    if (!type) {
      alertBox('error', 'This browser cannot record WebM video.');
      return;
    }
    const chunks: Blob[] = [];
    const rec = new MediaRecorder(stream, { mimeType: type, videoBitsPerSecond: 1000000 });
    recorder = rec;
    rec.ondataavailable = (e) => {
      if (e.data?.size) chunks.push(e.data);
    };
    rec.onstop = () => {
      $<HTMLButtonElement>(`${p}-start`).disabled = false;
      const blob = new Blob(chunks, { type: 'video/webm' });
      if (blob.size > LIMIT) {
        alertBox('error', 'The recording is too long; record a shorter one.');
        return;
      }
      $(`${p}-status`).textContent = 'Sending the video…';
      onBlob(blob);
    };
    rec.start(250);
    $<HTMLButtonElement>(`${p}-start`).disabled = true;
    $<HTMLButtonElement>(`${p}-stop`).disabled = false;
    $(`${p}-status`).textContent = `Recording… say the words, then stop (at most ${MAX_SECONDS} seconds).`;
    setTimeout(() => {
      if (rec.state === 'recording') rec.stop();
    }, MAX_SECONDS * 1000);
  });
  $(`${p}-stop`).addEventListener('click', () => {
    if (recorder && recorder.state === 'recording') recorder.stop();
    $<HTMLButtonElement>(`${p}-stop`).disabled = true;
  });
  return ui;
}
