import { useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

/** Deliveries and failures per minute: x in Unix seconds. */
export interface MinuteSeries {
  times: number[];
  delivered: number[];
  failed: number[];
}

/** A uPlot line chart that follows its container's width and updates in place. */
export function DeliveriesChart({ data }: { data: MinuteSeries }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | undefined>(undefined);

  useEffect(() => {
    const el = box.current!;
    const u = new uPlot(
      {
        width: el.clientWidth || 300,
        height: 220,
        scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(5, max)] } },
        series: [
          {},
          { label: "delivered", stroke: "#2e7d32", fill: "rgba(46,125,50,0.08)", width: 2 },
          { label: "failed", stroke: "#c62828", fill: "rgba(198,40,40,0.08)", width: 2 },
        ],
        axes: [{}, { label: "per minute", size: 50 }],
      },
      [[], [], []],
      el,
    );
    plot.current = u;
    const ro = new ResizeObserver(() => u.setSize({ width: el.clientWidth || 300, height: 220 }));
    ro.observe(el);
    return () => {
      ro.disconnect();
      u.destroy();
    };
  }, []);

  useEffect(() => {
    plot.current?.setData([data.times, data.delivered, data.failed]);
  }, [data]);

  return <div class="chart" ref={box} data-testid="deliveries-chart" />;
}
